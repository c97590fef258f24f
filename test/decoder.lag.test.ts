/**
 * The decoder's slot-lag report, read every few seconds for every sync database: over one
 * kept connection, not a new one each time, and written to the control database only when
 * the figures changed.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountStore } from '../src/control/accounts.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { IdlePools } from '../src/db/idle-pools.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/sql.ts';
import { Decoder } from '../src/decoder/stream.ts';
import { newDatabaseName } from '../src/ids.ts';
import { freshDatabase } from './harness/postgres.ts';
import { type SecondServer, startSecondServer } from './harness/second-server.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
const SYNC = 'sy_lagreport';
const REPORT_MS = 100;
let control: pg.Pool;
let admin: pg.Pool;
let target: pg.Pool;
let slot: string;
let decoder: Decoder;
let pools: IdlePools;
/**
 * The sync database's server, of this test alone: on the run's shared server the other test
 * files move the WAL by megabytes a second, and with it the figures this test holds still.
 */
let server: SecondServer;

test.before(async () => {
  const controlUrl = await freshDatabase('ctl');
  await migrateControlDatabase(controlUrl, logger);
  control = new pg.Pool({ connectionString: controlUrl });
  const accounts = new AccountStore(control, SecretBox.fromBase64(randomBytes(32).toString('base64')));
  const accountId = (await accounts.create('lag')).account.id;
  slot = newDatabaseName();
  server = await startSecondServer();
  await provisionDatabase({ adminUrl: server.adminUrl, name: slot, role: `${slot}_ro` }, 'lag-test-password', logger);
  const targetUrl = withDatabase(server.adminUrl, slot);
  target = new pg.Pool({ connectionString: targetUrl, max: 1 });
  await target.query('CREATE TABLE public.items (id text PRIMARY KEY, name text)');
  admin = new pg.Pool({ connectionString: server.adminUrl, max: 1 });
  pools = new IdlePools({ max: 1 });
  decoder = new Decoder({
    syncId: SYNC,
    accountId,
    databaseUrl: targetUrl,
    slot,
    control,
    rules: { collectionOf: (t) => t, keyOf: () => 'id' },
    logger,
    flushMs: 2,
    retryMs: 100,
    lagReportMs: REPORT_MS,
    pools,
  });
  decoder.start();
  // An idle connection ended from outside (a server stopping, another file's clean-up) is
  // replaced on the next query; unheard, its 'error' would end the whole file.
  for (const pool of [control, target, admin]) pool.on('error', () => undefined);
});

test.after(async () => {
  await decoder.stop();
  await pools.close();
  await Promise.all([target.end(), admin.end(), control.end()]);
  await server.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function sessions(): Promise<number> {
  // Counted as each session starts; read afresh, not from this session's stats snapshot.
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await admin.query<{ n: string }>('SELECT sessions::text AS n FROM pg_stat_database WHERE datname = $1', [slot]);
  return Number(rows[0]!.n);
}

async function progress(): Promise<{ version: string; lag: string | null; acked: string | null }> {
  const { rows } = await control.query<{ version: string; lag: string | null; acked: string | null }>(
    'SELECT xmin::text AS version, slot_lag_bytes::text AS lag, acked_lsn::text AS acked FROM decoder_progress WHERE sync_id = $1',
    [SYNC],
  );
  return rows[0] ?? { version: '', lag: null, acked: null };
}

async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
  // A report comes every REPORT_MS once the decoder's stream is up: far within this.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await read();
    if (ok(value) || Date.now() > deadline) return value;
    await sleep(50);
  }
}

test('the slot lag is read over one kept connection, not a new session each report', async () => {
  // Reports come before the sync's first event, while it has no progress row to update: a
  // fresh-clone run failed both tests so, when the insert came after the first report (the
  // report of a row not yet there was taken as written, and the figures unchanged since).
  await sleep(5 * REPORT_MS);
  // The first event makes the sync's progress row, which the reports then update.
  await target.query("INSERT INTO public.items VALUES ('first', 'one')");
  assert.ok((await until(progress, (p) => p.lag !== null)).lag !== null, 'the lag was reported');
  await sleep(5 * REPORT_MS);
  const before = await sessions();
  await sleep(20 * REPORT_MS);
  const opened = (await sessions()) - before;
  // Twenty reports meanwhile; the replication session reconnecting once would be one more.
  assert.ok(opened <= 2, `${opened} sessions opened for 20 slot-lag reads`);
});

test('an unchanged lag is not written again; a change of a megabyte is', async () => {
  let settled = await progress();
  const deadline = Date.now() + 30_000;
  for (let seen = 0; seen < 5; ) {
    assert.ok(Date.now() < deadline, 'the progress row never stopped changing');
    // Settled once the row keeps its version over a few reports.
    await sleep(2 * REPORT_MS);
    const now = await progress();
    seen = now.version === settled.version ? seen + 1 : 0;
    settled = now;
    assert.ok(settled.lag !== null);
  }
  await sleep(10 * REPORT_MS);
  assert.is((await progress()).version, settled.version, 'the row was rewritten with the same figures');
  // Figures that move by less than a megabyte are not news; 2 MB of changes are.
  await target.query("INSERT INTO public.items SELECT 'bulk' || n, repeat('x', 1000) FROM generate_series(1, 2000) AS n");
  const moved = await until(progress, (p) => p.acked !== settled.acked);
  assert.is.not(moved.acked, settled.acked, 'the decoder passed the insert and reported it');
  assert.is.not(moved.version, settled.version);
});

test.run();
