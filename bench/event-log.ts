/**
 * The event log's ceiling: what the control database's `events` table accepts when many
 * decoders append at once, against what the same server accepts of the same rows by plain COPY.
 *
 *   node --import tsx bench/event-log.ts [--syncs 40] [--changes 10000] [--decoders 1] [--backlog 0]
 *
 * Three PostgreSQL servers: the control database on one, and two target servers holding the
 * --syncs sync databases (the configured server and one added through the API; placement
 * alternates between them). The service runs as deployed: an `api` process, and --decoders
 * processes with the `decoder` role. Each sync database gets an Airtable-shaped table; then
 * every database at once takes --changes row changes (half inserts, half updates of those rows,
 * 1,000 rows a transaction, as the writer batches them), and the figure is the time until every
 * event is in the log, overall and steady (between 10 % and 90 % of the events in). With
 * --backlog 1 the decoders are stopped while the burst is written and started after it: the
 * writes then take no CPU from decoding. It prints the CPU each kind of process spent (and
 * waited for a CPU), what the control database's busy sessions were waiting on, and the
 * control server's CPU an event.
 *
 * The reference, in the same run: the events just logged, copied out and COPYed back into a
 * plain table of the control database (no index, not partitioned) by one connection per sync,
 * 1,000 rows a transaction; then into a table with the event log's two indexes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { SERVICE_NODE_FLAGS } from '../src/cli/node-flags.ts';
import { withDatabase } from '../src/db/sql.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { freePort } from '../test/harness/ports.ts';
import { api, arg, postmasterOf, processTable, root, sleep, startPostgres, type ProcessSample } from './lib.ts';

const SYNCS = arg('syncs', 40);
const CHANGES = arg('changes', 10_000);
const DECODERS = arg('decoders', 1);
const BACKLOG = arg('backlog', 0) === 1;
const BATCH = 1000;
const TOKEN = 'patEVENTLOGBENCH0.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

const shape = {
  schema: 'public',
  name: 'projects',
  key: 'id',
  columns: [
    { name: 'id', type: 'text' },
    { name: 'created_time', type: 'timestamptz' },
    { name: 'name', type: 'text' },
    { name: 'notes', type: 'text' },
    { name: 'status', type: 'text' },
    { name: 'amount', type: 'numeric' },
    { name: 'due', type: 'date' },
    { name: 'done', type: 'boolean' },
    { name: 'tags', type: 'text[]' },
  ],
};
/** The columns of row g of the burst, its id given. */
const row = (id: string) => `${id}, now(), 'Project ' || g, repeat('Notes on project ' || g || '. ', 4),
             (ARRAY['Todo', 'In progress', 'Done'])[1 + g % 3], g * 1.25, current_date + g % 30, g % 2 = 0, ARRAY['alpha', 'beta']`;
const ROW = row(`'rec' || lpad(g::text, 14, '0')`);

// --- servers, the fake, the service ---------------------------------------------------------------
const control = await startPostgres();
const targetA = await startPostgres();
const targetB = await startPostgres();
const controlUrl = await control.freshDatabase('ctl');
const controlDb = new URL(controlUrl).pathname.slice(1);
const fake = await startFakeAirtable({ port: 0, rateLimit: false });
fake.addToken(TOKEN, { bases: '*' });

const shared = {
  DATABASE_URL: controlUrl,
  TRIBUTARY_TARGET_DATABASE_URL: targetA.adminUrl,
  TRIBUTARY_SECRET_KEY: randomBytes(32).toString('base64'),
  TRIBUTARY_ADMIN_TOKEN: `tra_bench_${randomBytes(12).toString('hex')}`,
  TRIBUTARY_UPSTREAMS: `api.airtable.com=${fake.url}`,
  TRIBUTARY_LOG_LEVEL: 'info',
};

interface RoleProcess {
  name: string;
  child: ChildProcess;
  api: string;
  stop(): Promise<void>;
}

/** `tributary run --roles …` as deployed; resolves once it logs that it runs. Warnings pass through. */
async function startRoles(name: string, roles: string): Promise<RoleProcess> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-bench-svc-'));
  const apiPort = await freePort();
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, path.join(root, 'bin', 'tributary.js'), 'run', '--roles', roles], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...shared,
      TRIBUTARY_DATA_DIR: dataDir,
      TRIBUTARY_API_PORT: String(apiPort),
      TRIBUTARY_PROXY_PORT: String(await freePort()),
      TRIBUTARY_EVENTS_PORT: String(await freePort()),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  const running = new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${name} exited at start (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      // The service's own JSON log lines: level and msg.
      let parsed: { level?: number; msg?: string } = {};
      try {
        parsed = JSON.parse(line) as typeof parsed;
      } catch {
        // not JSON
      }
      if (parsed.msg === 'tributary is running') resolve();
      if ((parsed.level ?? 40) >= 40) process.stderr.write(`  [${name}] ${line}\n`);
    });
  });
  await running;
  return {
    name,
    child,
    api: `http://127.0.0.1:${apiPort}`,
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

const apiProcess = await startRoles('api', 'api');
const admin = shared.TRIBUTARY_ADMIN_TOKEN;
await api(apiProcess.api, admin, 'POST', '/api/servers', { url: targetB.adminUrl, region: 'us-west-2', capacity: 1000 });
let decoders = await Promise.all(Array.from({ length: DECODERS }, (_, i) => startRoles(`decoder ${i + 1}`, 'decoder')));

// --- the syncs and their tables -------------------------------------------------------------------
interface Sync {
  id: string;
  db: pg.Pool;
  server: 'A' | 'B';
}
const portOf = (url: string) => new URL(url).port;
const adminOf = { [portOf(targetA.adminUrl)]: targetA.adminUrl, [portOf(targetB.adminUrl)]: targetB.adminUrl };
const tokens: string[] = [];
const syncs: Sync[] = [];
const made = Date.now();
for (let start = 0; start < SYNCS; start += 4) {
  const batch = Array.from({ length: Math.min(4, SYNCS - start) }, (_, k) => start + k);
  syncs.push(
    ...(await Promise.all(
      batch.map(async (n) => {
        // Ten syncs an account, under the default limit of twenty.
        const index = Math.floor(n / 10);
        tokens[index] ??= (await api(apiProcess.api, admin, 'POST', '/api/accounts', { name: `log ${index}` })).api_token as string;
        const base = fake.createBase({ name: `Log ${n}` });
        const sync = await api(apiProcess.api, tokens[index]!, 'POST', '/api/syncs', { kind: 'airtable', base_id: base.id, api_key: TOKEN });
        const reader = new URL(sync.database.url as string);
        const adminUrl = adminOf[reader.port];
        if (!adminUrl) throw new Error(`sync ${sync.id} is on an unknown server ${reader.host}`);
        const db = new pg.Pool({ connectionString: withDatabase(adminUrl, reader.pathname.slice(1)), max: 1, idleTimeoutMillis: 0 });
        for (const statement of createTableStatements(shape)) await db.query(statement);
        return { id: sync.id as string, db, server: adminUrl === targetA.adminUrl ? ('A' as const) : ('B' as const) };
      }),
    )),
  );
}
const ctl = new pg.Pool({ connectionString: controlUrl, max: SYNCS + 4, idleTimeoutMillis: 0 });
const logged = async () => {
  const { rows } = await ctl.query<{ n: string }>('SELECT coalesce(sum(seq), 0)::text AS n FROM decoder_progress');
  return Number(rows[0]!.n);
};
async function until(what: string, done: () => Promise<boolean>, seconds = 120): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}
// Warm-up: a row each, so every decoder runs, its topic exists and today's partition is made.
await Promise.all(syncs.map((s) => s.db.query(`INSERT INTO projects SELECT ${row("'warm'")} FROM generate_series(0, 0) g`)));
await until('the warm-up events', async () => (await logged()) >= SYNCS);
const { rows: spread } = await ctl.query<{ owner: string; n: number }>(
  'SELECT decoder_lease_owner AS owner, count(*)::int AS n FROM syncs WHERE decoder_lease_owner IS NOT NULL GROUP BY 1 ORDER BY 2 DESC',
);
const onA = syncs.filter((s) => s.server === 'A').length;
console.log(
  `${SYNCS} syncs made in ${((Date.now() - made) / 1000).toFixed(0)} s: ${onA} on target server A, ${SYNCS - onA} on B; ` +
    `${DECODERS} decoder process(es) holding ${spread.map((r) => r.n).join(' + ')}`,
);

// --- measuring ---------------------------------------------------------------------------------------
const masters = {
  control: await postmasterOf(controlUrl),
  A: await postmasterOf(targetA.adminUrl),
  B: await postmasterOf(targetB.adminUrl),
};

/** CPU seconds, and seconds waited for a CPU, by kind of process between two readings of processTable(). */
function cpuByKind(
  before: Map<number, ProcessSample>,
  after: Map<number, ProcessSample>,
  decoderPids: Set<number>,
): Map<string, { cpu: number; waited: number }> {
  const out = new Map<string, { cpu: number; waited: number }>();
  const add = (kind: string, cpu: number, waited: number) => {
    const entry = out.get(kind) ?? { cpu: 0, waited: 0 };
    entry.cpu += cpu;
    entry.waited += waited;
    out.set(kind, entry);
  };
  for (const [pid, p] of after) {
    const was = before.get(pid);
    const spent = p.cpu - (was?.cpu ?? 0);
    const waited = p.waited - (was?.waited ?? 0);
    const words = p.title.replace(/^postgres:\s+/, '').split(/\s+/);
    let kind: string | undefined;
    if (decoderPids.has(pid)) kind = 'decoder processes (node)';
    else if (pid === apiProcess.child.pid) kind = 'api process (node)';
    else if (pid === process.pid) kind = 'this bench (writes, sampling)';
    else if (pid === masters.control) {
      kind = 'control server: postmaster';
      add('control server: backends that ended', p.endedChildren - (was?.endedChildren ?? 0), 0);
    } else if (pid === masters.A || pid === masters.B) {
      kind = 'target servers: other';
      add('target servers: backends that ended', p.endedChildren - (was?.endedChildren ?? 0), 0);
    } else if (p.ppid === masters.control) kind = words[1] === controlDb ? 'control server: backends' : `control server: ${words[0]}`;
    else if (p.ppid === masters.A || p.ppid === masters.B) {
      kind =
        words[0] === 'walsender'
          ? 'target servers: walsenders'
          : /\(\d+\)$/.test(words[2] ?? '')
            ? 'target servers: backends (writes)'
            : 'target servers: other';
    }
    if (kind) add(kind, spent, waited);
  }
  for (const [kind, entry] of out) if (entry.cpu <= 0 && entry.waited <= 0) out.delete(kind);
  return out;
}

/** The control server's WAL position, and the next transaction id: write transactions between two readings (statistics lag by seconds). */
async function controlCounters(): Promise<{ wal: bigint; commits: number }> {
  const { rows } = await ctl.query<{ wal: string; xid: string }>(
    `SELECT (pg_current_wal_lsn() - '0/0')::text AS wal, pg_snapshot_xmax(pg_current_snapshot())::text AS xid`,
  );
  return { wal: BigInt(rows[0]!.wal.split('.')[0]!), commits: Number(rows[0]!.xid) };
}

/** What the control database's sessions are doing, counted every 200 ms: a wait event, CPU, or waiting on their client. */
const waits = new Map<string, number>();
async function sampleWaits(): Promise<void> {
  const { rows } = await ctl.query<{ what: string; n: number }>(
    `SELECT CASE WHEN state = 'idle in transaction' THEN 'idle in transaction (waiting on the decoder)'
                 WHEN wait_event IS NULL THEN 'running (CPU)'
                 ELSE wait_event_type || ':' || wait_event END AS what, count(*)::int AS n
       FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND backend_type = 'client backend'
      GROUP BY 1`,
  );
  for (const r of rows) waits.set(r.what, (waits.get(r.what) ?? 0) + r.n);
}

const half = Math.ceil(CHANGES / 2);
async function burst(s: Sync): Promise<void> {
  for (let from = 0; from < half; from += BATCH) {
    await s.db.query(`INSERT INTO projects SELECT ${ROW} FROM generate_series($1::int, $2::int) g`, [from, Math.min(from + BATCH, half) - 1]);
  }
  for (let from = 0; from < CHANGES - half; from += BATCH) {
    await s.db.query(
      `UPDATE projects SET status = 'Done', amount = amount + 1
        WHERE id IN (SELECT 'rec' || lpad(g::text, 14, '0') FROM generate_series($1::int, $2::int) g)`,
      [from, Math.min(from + BATCH, CHANGES - half) - 1],
    );
  }
}

const total = SYNCS * CHANGES;
const base = await logged();
let writtenAt = 0;
if (BACKLOG) {
  await Promise.all(decoders.map((d) => d.stop()));
  const t = Date.now();
  await Promise.all(syncs.map(burst));
  console.log(`burst written with the decoders stopped: ${total} changes in ${((Date.now() - t) / 1000).toFixed(1)} s`);
}
/** Busy CPU seconds of the whole machine so far (every process's, other work included), from /proc/stat. */
function machineBusy(): number {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return (fields.reduce((a, b) => a + b, 0) - idle) / 100;
}
const counters = await controlCounters();
const busyBefore = machineBusy();
const cpuBefore = processTable();
const started = performance.now();
if (BACKLOG) {
  decoders = await Promise.all(Array.from({ length: DECODERS }, (_, i) => startRoles(`decoder ${i + 1}`, 'decoder')));
} else {
  void Promise.all(syncs.map(burst)).then(() => (writtenAt = performance.now()));
}
const targets = [targetA, targetB].map((t) => new pg.Pool({ connectionString: t.adminUrl, max: 1, idleTimeoutMillis: 0 }));
/** WAL the target servers' walsenders have yet to send, on average per walsender (bytes): how far decoding is behind. */
async function unsent(): Promise<number> {
  let bytes = 0;
  let senders = 0;
  for (const t of targets) {
    const { rows } = await t.query<{ behind: string; n: number }>(
      `SELECT coalesce(sum(pg_current_wal_lsn() - sent_lsn), 0)::text AS behind, count(*)::int AS n FROM pg_stat_replication`,
    );
    bytes += Number(rows[0]!.behind);
    senders += rows[0]!.n;
  }
  return senders > 0 ? bytes / senders : 0;
}
const samples: Array<{ at: number; n: number; unsent: number }> = [];
for (;;) {
  const n = (await logged()) - base;
  samples.push({ at: performance.now(), n, unsent: await unsent() });
  if (n >= total) break;
  if (performance.now() - started > 600_000) throw new Error(`after 600 s, ${total - n} of ${total} events are not in the log`);
  await sampleWaits();
  await sleep(200);
}
const seconds = (performance.now() - started) / 1000;
const cpu = cpuByKind(cpuBefore, processTable(), new Set(decoders.map((d) => d.child.pid!)));
const busy = machineBusy() - busyBefore;
const countersAfter = await controlCounters();
const { rows: counted } = await ctl.query<{ n: string }>('SELECT count(*)::text AS n FROM events');
if (Number(counted[0]!.n) !== total + SYNCS) throw new Error(`expected ${total + SYNCS} events in the log, found ${counted[0]!.n}`);

/** Events a second between the samples where 10 % and 90 % of them were in: the steady rate. */
function steadyRate(): number {
  const first = samples.find((s) => s.n >= total * 0.1)!;
  const last = samples.find((s) => s.n >= total * 0.9)!;
  return last.at > first.at ? (last.n - first.n) / ((last.at - first.at) / 1000) : total / seconds;
}
const rate = total / seconds;
const steady = steadyRate();
const commits = countersAfter.commits - counters.commits;
const walBytes = Number(countersAfter.wal - counters.wal);
const controlCpu = [...cpu].filter(([k]) => k.startsWith('control server')).reduce((sum, [, v]) => sum + v.cpu, 0);

console.log(
  `\nevent log: ${total} events from ${SYNCS} decoders (${DECODERS} process(es)), ${BACKLOG ? 'a backlog (decoders started after the burst)' : 'written and decoded at once'}`,
);
if (!BACKLOG) console.log(`  the burst was written in ${((writtenAt - started) / 1000).toFixed(1)} s`);
console.log(`  all in the log after ${seconds.toFixed(1)} s: ${Math.round(rate)} events/s; steady (10 %–90 %) ${Math.round(steady)} events/s`);
console.log(
  `  control database: ${commits} write transactions (${(total / Math.max(commits, 1)).toFixed(0)} events a transaction), ` +
    `${(walBytes / 1024 / 1024).toFixed(0)} MB of WAL (${(walBytes / total).toFixed(0)} bytes an event)`,
);
console.log(`  CPU over ${seconds.toFixed(1)} s (${(seconds * os.cpus().length).toFixed(1)} core-s on ${os.cpus().length} cores):`);
const ours = [...cpu.values()].reduce((sum, v) => sum + v.cpu, 0);
console.log(`    the machine was busy ${busy.toFixed(1)} core-s: ${ours.toFixed(1)} of them this run's, ${Math.max(0, busy - ours).toFixed(1)} other work`);
console.log('    CPU s   waited for a CPU s');
for (const [k, v] of [...cpu].sort((a, b) => b[1].cpu - a[1].cpu)) {
  if (v.cpu >= 0.05) console.log(`  ${v.cpu.toFixed(2).padStart(7)}  ${v.waited.toFixed(2).padStart(7)}  ${k}`);
}
const perEvent = (prefix: string) => ([...cpu].filter(([k]) => k.startsWith(prefix)).reduce((sum, [, v]) => sum + v.cpu, 0) / total) * 1e6;
console.log(
  `  CPU an event: target servers ${perEvent('target servers').toFixed(1)} µs (walsenders ${perEvent('target servers: walsenders').toFixed(1)}), ` +
    `decoders ${perEvent('decoder').toFixed(1)} µs, control server ${perEvent('control server').toFixed(1)} µs; all of this run's ${((ours / total) * 1e6).toFixed(1)} µs`,
);
console.log(`  the control server's CPU alone would take ${Math.round(total / controlCpu)} events/s a core`);
// Events in the log at each whole second: where a run spent its time (start, steady, tail).
const timeline: string[] = [];
const behind: string[] = [];
for (let second = 1; second <= Math.ceil(seconds); second++) {
  const upTo = samples.filter((p) => p.at - started <= second * 1000).at(-1);
  timeline.push(`${Math.round((100 * (upTo?.n ?? 0)) / total)}`);
  behind.push(`${((upTo?.unsent ?? 0) / 1024 / 1024).toFixed(0)}`);
}
console.log(`  % of the events in the log after each second: ${timeline.join(' ')}`);
console.log(`  WAL not yet sent, MB per walsender, each second: ${behind.join(' ')}`);
console.log(
  `  load average of the machine at the end (other work included): ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
const sampled = [...waits.values()].reduce((a, b) => a + b, 0);
console.log(`  the control database's busy sessions, ${samples.length} samples:`);
for (const [k, v] of [...waits].sort((a, b) => b[1] - a[1])) console.log(`    ${((100 * v) / sampled).toFixed(0).padStart(3)} %  ${k}`);

// --- the reference: the same rows by plain COPY ------------------------------------------------------
/** Each sync's events as COPY text, cut into transactions of BATCH rows (no copy of the bytes). */
async function copyOut(syncId: string): Promise<Buffer[]> {
  const client = await ctl.connect();
  try {
    const parts: Buffer[] = [];
    const stream = client.query(copyTo(`COPY (SELECT * FROM events WHERE sync_id = ${pg.escapeLiteral(syncId)} AND seq > 1 ORDER BY seq) TO STDOUT`));
    for await (const chunk of stream) parts.push(chunk as Buffer);
    const data = Buffer.concat(parts);
    const chunks: Buffer[] = [];
    let at = 0;
    let rows = 0;
    for (let i = data.indexOf(10); i >= 0; i = data.indexOf(10, i + 1)) {
      if (++rows % BATCH === 0) {
        chunks.push(data.subarray(at, i + 1));
        at = i + 1;
      }
    }
    if (at < data.length) chunks.push(data.subarray(at));
    return chunks;
  } finally {
    client.release();
  }
}
const rowsOf = await Promise.all(syncs.map((s) => copyOut(s.id)));
const bytes = rowsOf.flat().reduce((sum, b) => sum + b.length, 0);

async function reference(table: string, indexes: boolean): Promise<{ rate: number; controlCpu: number }> {
  await ctl.query(`CREATE TABLE ${table} (LIKE events)`);
  if (indexes) {
    await ctl.query(`CREATE INDEX ON ${table} (topic, partition, "offset")`);
    await ctl.query(`CREATE INDEX ON ${table} (sync_id, seq)`);
  }
  const before = processTable();
  const t = performance.now();
  await Promise.all(
    rowsOf.map(async (chunks) => {
      const client = await ctl.connect();
      try {
        for (const chunk of chunks) {
          await client.query('BEGIN');
          await pipeline(Readable.from([chunk]), client.query(copyFrom(`COPY ${table} FROM STDIN`)));
          await client.query('COMMIT');
        }
      } finally {
        client.release();
      }
    }),
  );
  const s = (performance.now() - t) / 1000;
  const spent = [...cpuByKind(before, processTable(), new Set())].filter(([k]) => k.startsWith('control server')).reduce((sum, [, v]) => sum + v.cpu, 0);
  return { rate: total / s, controlCpu: spent };
}
const plain = await reference('plain_events', false);
const indexed = await reference('indexed_events', true);
console.log(
  `\nreference: the same ${total} rows (${(bytes / total).toFixed(0)} bytes each as COPY text), ${SYNCS} connections, COPY of ${BATCH} rows a transaction`,
);
for (const [label, r] of [
  ['plain table', plain],
  ["table with the log's two indexes", indexed],
] as const) {
  console.log(
    `  ${label.padEnd(34)} ${String(Math.round(r.rate)).padStart(7)} rows/s, control server ${((r.controlCpu / total) * 1e6).toFixed(1)} µs of CPU a row; event log / this: ${(rate / r.rate).toFixed(2)} overall, ${(steady / r.rate).toFixed(2)} steady`,
  );
}

for (const s of syncs) await s.db.end();
for (const t of targets) await t.end();
await ctl.end();
await Promise.all(decoders.map((d) => d.stop()));
await apiProcess.stop();
await fake.close();
await targetA.stop();
await targetB.stop();
await control.stop();
process.exit(0);
