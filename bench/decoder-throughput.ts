/**
 * Decoder throughput: events/s from the WAL into the durable event log, against the raw
 * pgoutput decode rate of `pg_recvlogical` reading the same changes in the same run.
 *
 * Both read a slot created before the changes were written, so both decode exactly the same
 * WAL. pg_recvlogical only receives the decoded stream and writes it to /dev/null: the
 * server-side decode cost plus nothing; that is the ceiling any consumer has.
 *
 *   node --import tsx bench/decoder-throughput.ts [rows=100000]
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import { AccountStore } from '../src/control/accounts.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/sql.ts';
import { Decoder } from '../src/decoder/stream.ts';
import { newDatabaseName } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { postgresCpuSeconds, postgresCpuSpent, startPostgres } from './lib.ts';

const run = promisify(execFile);
const ROWS = Number(process.argv[2] ?? 100_000);
const BATCH = 1000;
const logger = createLogger({ level: 'warn' });

const shape = {
  schema: 'public',
  name: 'customer',
  key: 'id',
  columns: [
    { name: 'id', type: 'text' },
    { name: 'name', type: 'text' },
    { name: 'email', type: 'text' },
    { name: 'balance', type: 'bigint' },
    { name: 'created', type: 'timestamptz' },
    { name: 'livemode', type: 'boolean' },
    { name: 'metadata', type: 'jsonb' },
    { name: 'preferred_locales', type: 'text[]' },
  ],
};

async function main(): Promise<void> {
  const server = await startPostgres();
  try {
    const controlUrl = await server.freshDatabase('ctl');
    await migrateControlDatabase(controlUrl, logger);
    const control = new pg.Pool({ connectionString: controlUrl, max: 4 });
    const accountId = (await new AccountStore(control, SecretBox.fromBase64(randomBytes(32).toString('base64'))).create('bench')).account.id;
    const name = newDatabaseName();
    await provisionDatabase({ adminUrl: server.adminUrl, name, role: `${name}_ro` }, 'bench-password', logger);
    const targetUrl = withDatabase(server.adminUrl, name);
    const target = new pg.Pool({ connectionString: targetUrl, max: 2 });
    for (const statement of createTableStatements(shape)) await target.query(statement);
    // The peer's slot starts where ours does: before the first change.
    await target.query("SELECT pg_create_logical_replication_slot('peer', 'pgoutput')");

    // The changes: inserts, then updates of two columns, in writer-sized transactions.
    const written = Date.now();
    for (let start = 0; start < ROWS; start += BATCH) {
      await target.query(
        `INSERT INTO customer SELECT 'cus_' || g, 'Customer ' || g, 'c' || g || '@example.com', g * 10, now(), false,
                jsonb_build_object('tier', 'gold', 'n', g), ARRAY['en', 'de']
           FROM generate_series($1::int, $2::int) g`,
        [start, Math.min(start + BATCH, ROWS) - 1],
      );
    }
    for (let start = 0; start < ROWS; start += BATCH) {
      await target.query(`UPDATE customer SET balance = balance + 1, name = name || '!' WHERE id = ANY($1)`, [
        Array.from({ length: Math.min(BATCH, ROWS - start) }, (_, i) => `cus_${start + i}`),
      ]);
    }
    const { rows } = await target.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    const endLsn = rows[0]!.lsn;
    const events = ROWS * 2;
    console.log(`wrote ${events} changes in ${((Date.now() - written) / 1000).toFixed(1)} s; WAL end ${endLsn}`);

    // The peer: pg_recvlogical decoding the same WAL to /dev/null.
    const url = new URL(targetUrl);
    const peerStarted = process.hrtime.bigint();
    await run(
      'pg_recvlogical',
      [
        '-d',
        name,
        '-h',
        url.hostname,
        '-p',
        url.port,
        '-U',
        decodeURIComponent(url.username),
        '--slot',
        'peer',
        '--start',
        '--no-loop',
        '-o',
        'proto_version=1',
        '-o',
        'publication_names=tributary',
        '--endpos',
        endLsn,
        '-f',
        '/dev/null',
      ],
      { env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password) } },
    );
    const peerSeconds = Number(process.hrtime.bigint() - peerStarted) / 1e9;

    // Ours: from the slot to durable events in the control database.
    const decoder = new Decoder({
      syncId: 'sy_bench',
      accountId,
      databaseUrl: targetUrl,
      slot: name,
      control,
      rules: { collectionOf: (t) => (t.startsWith('_') ? undefined : t), keyOf: () => 'id' },
      logger,
    });
    const cpuBefore = postgresCpuSeconds();
    const nodeBefore = process.cpuUsage();
    const started = process.hrtime.bigint();
    decoder.start();
    for (;;) {
      const { rows: progress } = await control.query<{ done: boolean }>('SELECT seq >= $2 AS done FROM decoder_progress WHERE sync_id = $1', [
        'sy_bench',
        events,
      ]);
      if (progress[0]?.done) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const oursSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    const nodeCpu = process.cpuUsage(nodeBefore);
    const cpu = postgresCpuSpent(cpuBefore, postgresCpuSeconds());
    await decoder.stop();
    const { rows: count } = await control.query<{ n: string }>('SELECT count(*) AS n FROM events');
    if (Number(count[0]!.n) !== events) throw new Error(`expected ${events} events in the log, found ${count[0]!.n}`);

    const ours = events / oursSeconds;
    const peer = events / peerSeconds;
    console.log(`pg_recvlogical (decode only, to /dev/null): ${peerSeconds.toFixed(2)} s = ${Math.round(peer)} changes/s`);
    console.log(`decoder (WAL -> durable event log):        ${oursSeconds.toFixed(2)} s = ${Math.round(ours)} events/s`);
    console.log(`CPU while ours ran (${(oursSeconds * 2).toFixed(2)} core-s on 2 cores): node ${((nodeCpu.user + nodeCpu.system) / 1e6).toFixed(2)} s`);
    for (const p of cpu) console.log(`  ${p.seconds.toFixed(2)} s  ${p.title.replace(name, '<sync db>')}`);
    console.log(`ratio ours/pg_recvlogical: ${(ours / peer).toFixed(2)}; target >= 40000 events/s: ${ours >= 40_000 ? 'met' : 'missed'}`);
    await target.end();
    await control.end();
  } finally {
    await server.stop();
  }
}

await main();
