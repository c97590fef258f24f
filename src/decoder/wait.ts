import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { IdlePools } from '../db/idle-pools.ts';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { withClient } from '../db/sql.ts';
import { type EventBus, WAITS_CHANNEL } from '../events/bus.ts';

/**
 * Waits until the sync's decoder has made durable every change committed in the sync
 * database before now. A non-transactional logical message is written into the sync's WAL;
 * it reaches the decoder after every transaction that committed before it, and the decoder
 * reports it (NOTIFY on the control database, and a row in wait_markers_reached) once those
 * are in the event log. Answers the marker's WAL position, or undefined on timeout (no decoder
 * running, or one far behind).
 */
export async function waitForDecoder(options: {
  databaseUrl: string;
  bus: EventBus;
  /** The control database, where reached markers are recorded. */
  control: pg.Pool;
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
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_logical_emit_message(false, $1, $2)::text AS lsn, txid_current()', [
        MESSAGE_PREFIX.wait,
        token,
      ]);
      return rows[0]!.lsn;
    };
    const pool = options.pools?.get(options.databaseUrl);
    const lsn = pool ? await emitPooled(pool, emit) : await withClient(options.databaseUrl, emit);
    return (await heardOrRecorded(options.control, token, reached, cancel)) ? { lsn } : undefined;
  } catch (error) {
    cancel();
    throw error;
  }
}

/** How often a waiter looks for its marker in the table, in case its NOTIFY went unheard. */
const RECHECK_MS = 1000;

/**
 * The NOTIFY answers almost every wait within milliseconds. It is lost when this process's
 * LISTEN connection is being made again at that moment, so the waiter also looks the marker up
 * every second, and once more at its deadline.
 */
async function heardOrRecorded(control: pg.Pool, token: string, reached: Promise<boolean>, cancel: () => void): Promise<boolean> {
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const tick = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), RECHECK_MS)));
    // true: heard; false: the deadline passed unheard; undefined: a second went by.
    const heard = await Promise.race([reached, tick]);
    clearTimeout(timer);
    if (heard === true) return true;
    const { rows } = await control.query('SELECT 1 FROM wait_markers_reached WHERE token = $1', [token]);
    if (rows.length > 0) {
      cancel();
      return true;
    }
    if (heard === false) return false;
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

/**
 * The decoder's side: the marker `token` was reached and every change before it is logged.
 * Recorded as well as announced: a waiter not listening at this moment looks it up.
 */
export async function markReached(control: pg.Pool, token: string): Promise<void> {
  await control.query(
    `WITH recorded AS (INSERT INTO wait_markers_reached (token) VALUES ($2) ON CONFLICT DO NOTHING),
          expired AS (DELETE FROM wait_markers_reached WHERE reached_at < now() - interval '10 minutes')
     SELECT pg_notify($1, $2)`,
    [WAITS_CHANNEL, token],
  );
}
