import { randomUUID } from 'node:crypto';
import { withClient } from '../db/sql.ts';
import type { EventBus } from '../events/bus.ts';

/** Prefix of the WAL marker a waiter writes into a sync database. */
export const WAIT_PREFIX = 'tributary.wait';

/**
 * Waits until the sync's decoder has made durable every change committed in the sync
 * database before now. A non-transactional logical message is written into the sync's WAL;
 * it reaches the decoder after every transaction that committed before it, and the decoder
 * reports it (NOTIFY on the control database) once those are in the event log. Answers the
 * marker's WAL position, or undefined on timeout (no decoder running, or one far behind).
 */
export async function waitForDecoder(options: { databaseUrl: string; bus: EventBus; timeoutMs: number }): Promise<{ lsn: string } | undefined> {
  const token = randomUUID();
  const { reached, cancel } = options.bus.tokenReached(token, options.timeoutMs);
  try {
    const lsn = await withClient(options.databaseUrl, async (client) => {
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_logical_emit_message(false, $1, $2)::text AS lsn', [WAIT_PREFIX, token]);
      return rows[0]!.lsn;
    });
    return (await reached) ? { lsn } : undefined;
  } catch (error) {
    cancel();
    throw error;
  }
}
