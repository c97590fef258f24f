/**
 * A backfill on demand of 100k rows through the real service (its own process: decoder,
 * backfill runner, event log, deliverer), and what it does to live changes meanwhile.
 *
 *   node --import tsx bench/backfill.ts [--rows 100000] [--rate 200] [--idle 10]
 *
 * 1. `rows` rows are written into a table of a sync database and logged as inserts. The rate
 *    at which the decoder logs them is the reference: the same decoder and log, on this machine.
 * 2. Idle: live inserts into another table at `rate` a second for `idle` seconds, each timed
 *    from its commit to its arrival at a webhook subscribed to that table's topic.
 * 3. The backfill of the first table runs while the same live load goes on: its rate (rows
 *    over the time from the request to `done`, which is once its last read is logged, so in
 *    the REST log) and the live changes' latency meanwhile, against the idle figures.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { api, arg, percentile, postgresCpuSeconds, sleep, startPostgres, startServiceProcess } from './lib.ts';

const ROWS = arg('rows', 100_000);
const RATE = arg('rate', 200);
const IDLE_S = arg('idle', 10);
const TICK_MS = 10;
const TOKEN = 'patBENCHBENCHBENC.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

const table = (name: string) => ({
  schema: 'public',
  name,
  key: 'id',
  columns: [
    { name: 'id', type: 'text' },
    { name: 'name', type: 'text' },
    { name: 'email', type: 'text' },
    { name: 'amount', type: 'bigint' },
    { name: 'paid', type: 'boolean' },
    { name: 'tags', type: 'text[]' },
    { name: 'meta', type: 'jsonb' },
    { name: 'created', type: 'timestamptz' },
  ],
});

const stats = (values: number[]) =>
  `p50 ${percentile(values, 50).toFixed(1)} ms, p99 ${percentile(values, 99).toFixed(1)} ms, max ${Math.max(...values).toFixed(1)} ms`;

/** CPU seconds (user + system) a process has used so far, from /proc. */
function cpuSeconds(pid: number | undefined): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function main(): Promise<void> {
  const server = await startPostgres();
  const fake = await startFakeAirtable({ port: 0 });
  fake.addToken(TOKEN, { bases: '*' });
  fake.createBase({ id: 'appBACKFILLBACKFI', name: 'Backfill' });
  const controlUrl = await server.freshDatabase('ctl');
  const svc = await startServiceProcess({
    controlUrl,
    targetUrl: server.adminUrl,
    upstreams: `api.airtable.com=${fake.url}`,
    roles: 'api,decoder,events',
    env: { TRIBUTARY_WEBHOOK_ALLOW_PRIVATE: '1' },
  });
  const arrived = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const id = (JSON.parse(body) as { id: string }).id;
      if (!arrived.has(id)) arrived.set(id, performance.now());
      res.writeHead(204).end();
    });
  });
  receiver.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const control = new pg.Pool({ connectionString: controlUrl, max: 1 });
  let writer: pg.Pool | undefined;
  try {
    const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'backfill' });
    const token = account.api_token as string;
    const sync = await api(svc.api, token, 'POST', '/api/syncs', { kind: 'airtable', base_id: 'appBACKFILLBACKFI', api_key: TOKEN });
    const dbUrl = new URL(sync.database.url as string);
    const admin = new URL(server.adminUrl);
    dbUrl.username = admin.username;
    dbUrl.password = admin.password;
    writer = new pg.Pool({ connectionString: dbUrl.toString(), max: 4 });
    for (const statement of [...createTableStatements(table('items')), ...createTableStatements(table('live'))]) await writer.query(statement);

    // 1. The rows to backfill, logged as inserts: the decoder's own rate is the reference.
    const loadStarted = performance.now();
    const batch = 5_000;
    for (let n = 0; n < ROWS; n += batch) {
      await writer.query(
        `INSERT INTO items SELECT 'rec' || lpad(i::text, 14, '0'), 'Item ' || i, 'user' || i || '@example.com', i * 100, i % 2 = 0,
                ARRAY['a', 'b' || (i % 7)], jsonb_build_object('n', i, 'note', 'row ' || i), now() - make_interval(secs => i)
           FROM generate_series($1::int, $2::int) i`,
        [n, Math.min(ROWS, n + batch) - 1],
      );
    }
    // Logged: the decoder's progress counts every insert (the sync has no other events).
    while ((await control.query<{ seq: string }>('SELECT seq FROM decoder_progress WHERE sync_id = $1', [sync.id])).rows.every((r) => Number(r.seq) < ROWS)) {
      await sleep(20);
    }
    const insertRate = ROWS / ((performance.now() - loadStarted) / 1000);
    console.log(`${ROWS} rows written and logged as inserts: ${insertRate.toFixed(0)} rows/s (write + decode + log, the reference)`);

    await api(svc.api, token, 'POST', `/api/syncs/${sync.id}/webhooks`, {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
      topics: [`svc.${sync.id}.live`],
    });
    const committed = new Map<string, number>();
    const committedWall = new Map<string, number>();
    let next = 0;
    const ids = (upTo: number) => Array.from({ length: upTo }, (_, i) => `live${i}`);
    const liveLoad = (until: () => boolean) => {
      const perTick = Math.max(1, Math.round((RATE * TICK_MS) / 1000));
      return (async () => {
        const started = performance.now();
        const inFlight: Promise<unknown>[] = [];
        for (let tick = 0; !until(); tick++) {
          const ids = Array.from({ length: perTick }, () => `live${next++}`);
          inFlight.push(
            writer!.query(`INSERT INTO live (id, name, amount) SELECT id, 'live', 1 FROM unnest($1::text[]) id`, [ids]).then(() => {
              const at = performance.now();
              const wall = Date.now();
              for (const id of ids) {
                committed.set(id, at);
                committedWall.set(id, wall);
              }
            }),
          );
          await sleep(Math.max(0, started + (tick + 1) * TICK_MS - performance.now()));
        }
        await Promise.all(inFlight);
        return ids(next);
      })();
    };
    const latencies = async (list: string[]) => {
      const deadline = Date.now() + 60_000;
      while (list.some((id) => !arrived.has(id)) && Date.now() < deadline) await sleep(50);
      return list.map((id) => (arrived.get(id) ?? Number.POSITIVE_INFINITY) - committed.get(id)!);
    };

    // 2. Idle: live changes alone (after a second of warm-up).
    await liveLoad(
      (
        (end) => () =>
          performance.now() > end
      )(performance.now() + 1_000),
    );
    const warm = next;
    const idleEnd = performance.now() + IDLE_S * 1000;
    const idleIds = (await liveLoad(() => performance.now() > idleEnd)).slice(warm);
    const idle = await latencies(idleIds);
    console.log(`idle: commit → webhook ${stats(idle)} (${idle.length} live changes at ${RATE}/s)`);

    // 3. The backfill, with the same live load.
    const before = next;
    let done = false;
    const requested = performance.now();
    const load = liveLoad(() => done);
    const started = await api(svc.api, token, 'POST', `/api/syncs/${sync.id}/backfills`, { collections: ['items'] });
    const cpuAt = () => ({ service: cpuSeconds(svc.child.pid), postgres: [...postgresCpuSeconds().values()].reduce((a, p) => a + p.seconds, 0) });
    const cpuBefore = cpuAt();
    let view = started;
    while (view.state === 'running') {
      await sleep(100);
      view = await api(svc.api, token, 'GET', `/api/syncs/${sync.id}/backfills/${started.id}`);
    }
    const seconds = (performance.now() - requested) / 1000;
    const cpuAfter = cpuAt();
    console.log(
      `CPU during the backfill: service ${(cpuAfter.service - cpuBefore.service).toFixed(1)} s, PostgreSQL ${(cpuAfter.postgres - cpuBefore.postgres).toFixed(1)} s, over ${seconds.toFixed(1)} s on ${os.cpus().length} cores`,
    );
    done = true;
    const duringIds = (await load).slice(before);
    const during = await latencies(duringIds);
    if (view.state !== 'done') throw new Error(`the backfill ended ${view.state}: ${view.error}`);
    const { rows } = await control.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM events WHERE sync_id = $1 AND topic = $2 AND value LIKE '%"event":"read"%'`,
      [sync.id, `svc.${sync.id}.items`],
    );
    const rate = view.rows / seconds;
    console.log(`backfill: ${view.rows} rows in ${seconds.toFixed(2)} s = ${rate.toFixed(0)} rows/s into the REST log (${rows[0]!.n} read events there)`);
    console.log(`during the backfill: commit → webhook ${stats(during)} (${during.length} live changes at ${RATE}/s)`);
    const { rows: logged } = await control.query<{ id: string; at: Date }>(
      `SELECT record_id AS id, created_at AS at FROM events WHERE sync_id = $1 AND topic = $2 AND record_id = ANY($3)`,
      [sync.id, `svc.${sync.id}.live`, duringIds],
    );
    console.log(`  of which commit → decoded (the event's created_at): ${stats(logged.map((r) => r.at.getTime() - committedWall.get(r.id)!))}`);
    const ratio = percentile(during, 99) / percentile(idle, 99);
    console.log(
      `backfill ÷ logging the same rows as inserts: ${(rate / insertRate).toFixed(2)}×; target ≥ 20,000 rows/s: ${rate >= 20_000 ? 'met' : 'missed'}`,
    );
    console.log(`live p99 during ÷ idle: ${ratio.toFixed(2)}×; target ≤ 2×: ${ratio <= 2 ? 'met' : 'missed'}`);
  } finally {
    await writer?.end();
    await control.end();
    receiver.close();
    await svc.stop();
    await fake.close();
    await server.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
