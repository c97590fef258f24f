import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { IdlePools } from '../db/idle-pools.ts';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { withClient } from '../db/sql.ts';
import type { EventBus } from '../events/bus.ts';

/** Prefix of the WAL marker a waiter writes into a sync database. */

/**
 * Waits until the sync's decoder has made durable every change committed in the sync
 * database before now. A non-transactional logical message is written into the sync's WAL;
 * it reaches the decoder after every transaction that committed before it, and the decoder
 * reports it (NOTIFY on the control database) once those are in the event log. Answers the
 * marker's WAL position, or undefined on timeout (no decoder running, or one far behind).
 */
export async function waitForDecoder(options: {
  databaseUrl: string;
  bus: EventBus;
  timeoutMs: number;
  /** Where the marker's connection comes from; without it, a new connection. */
  pools?: IdlePools;
}): Promise<{ lsn: string } | undefined> {
  const token = randomUUID();
  const { reached, cancel } = options.bus.tokenReached(token, options.timeoutMs);
  try {
    const emit = async (client: pg.ClientBase) => {
      // The walsender sends only WAL that is on disk, and nothing flushes a lone message until
      // the WAL writer's next round (up to wal_writer_delay, 200 ms). Taking a transaction id
      // makes this statement's commit flush the WAL, message included (any server version).
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_logical_emit_message(false, $1, $2)::text AS lsn, txid_current()', [MESSAGE_PREFIX.wait, token]);
      return rows[0]!.lsn;
    };
    const pool = options.pools?.get(options.databaseUrl);
    const lsn = pool ? await emitPooled(pool, emit) : await withClient(options.databaseUrl, emit);
    return (await reached) ? { lsn } : undefined;
  } catch (error) {
    cancel();
    throw error;
  }
}

async function emitPooled<T>(pool: pg.Pool, emit: (client: pg.ClientBase) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    const result = await emit(client);
    client.release();
    return result;
  } catch (error) {
    client.release(error as Error); // not back into the pool: the connection may be broken
    throw error;
  }
}
