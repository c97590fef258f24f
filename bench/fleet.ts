/**
 * Many syncs on one machine: where the CPU and memory go, and the change lag.
 *
 *   node --import tsx bench/fleet.ts [--airtable 40] [--stripe 0] [--records 300]
 *        [--seconds 60] [--changes-per-second 2] [--control-apart 0|1]
 *        [--airtable-servers 1] [--stripe-servers 0] [--sweep-probes 0] [--pings 0|1]
 *        [--statements 0|1]
 *
 * N Airtable syncs (bases of --records records in three tables, each base its own user and
 * token, default share) and M idle Stripe syncs, the whole service in one process
 * (`tributary run`, every role), the fakes in a process of their own. After every first
 * cycle and a settling minute, for --seconds it makes edits, creates and deletes in random
 * bases and measures each one's lag (upstream change to the row in the sync's database, read
 * as the sync's reader), and the CPU and PSS of the service and of PostgreSQL by process
 * kind: walsenders, the sync databases' backends, the control database's backends, the rest.
 * With --control-apart 1 the control database has a PostgreSQL server of its own.
 * --airtable-servers I spreads the Airtable syncs over I sync servers (the configured one and
 * I - 1 joined through the pool API); --stripe-servers J puts the Stripe syncs on J servers of
 * their own (the Airtable ones drained meanwhile), as an operator keeps quiet syncs apart from
 * busy ones. 0 puts them with the Airtable syncs. --sweep-probes K also changes K rows in the
 * sync databases behind the syncs' backs, over the window's first half: what only a sweep
 * finds, timed until a sweep has put the upstream's value back (the bound the sweep's pace
 * gives to what change capture cannot see). --pings 1 gives the service a public URL (its
 * own API), so Airtable's webhooks ping it and change capture reads a base when pinged, and
 * every 10 s between pings, instead of every second.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { withDatabase } from '../src/db/sql.ts';
import { api, arg, type ProcessSample, percentile, processTable, root, sleep, startPostgres, startServiceProcess } from './lib.ts';

const airtableSyncs = arg('airtable', 40);
const stripeSyncs = arg('stripe', 0);
const records = arg('records', 300);
const seconds = arg('seconds', 60);
const changeRate = arg('changes-per-second', 2);
const controlApart = arg('control-apart', 0) === 1;
const settleSeconds = arg('settle', 60);
const airtableServers = Math.max(1, arg('airtable-servers', 1));
const stripeServers = arg('stripe-servers', 0);
const sweepProbes = arg('sweep-probes', 0);
const pings = arg('pings', 0) === 1;
const statementsOn = controlApart && arg('statements', 0) === 1;

// --- the fakes, in their own process -------------------------------------------------------
const fakes = spawn(
  process.execPath,
  ['--import', 'tsx', path.join(root, 'bench', 'fleet-fakes.ts'), String(airtableSyncs), String(stripeSyncs), String(records)],
  {
    cwd: root,
    stdio: ['pipe', 'pipe', 'inherit'],
  },
);
process.once('exit', () => fakes.kill('SIGKILL'));
const lines = createInterface({ input: fakes.stdout! });
const waiting: Array<(line: string) => void> = [];
lines.on('line', (line) => waiting.shift()?.(line));
const nextLine = () => new Promise<string>((resolve) => waiting.push(resolve));
// The fakes' own JSON lines; fields as fleet-fakes.ts documents them.
const ask = async (command: string): Promise<any> => {
  const answer = nextLine();
  fakes.stdin!.write(`${command}\n`);
  return JSON.parse(await answer);
};
const ready = JSON.parse(await nextLine()) as { airtable: string; stripe: string; bases: Array<{ id: string; token: string }>; keys: string[] };

// --- PostgreSQL and the service ---------------------------------------------------------------
const targets = await Promise.all(Array.from({ length: airtableServers + stripeServers }, () => startPostgres()));
const target = targets[0]!;
const control = controlApart ? await startPostgres({ statements: statementsOn }) : target;
const controlUrl = await control.freshDatabase('ctl');
const controlDb = new URL(controlUrl).pathname.slice(1);
// Stopped early (Ctrl-C): leave no server behind.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    fakes.kill('SIGKILL');
    void Promise.all([...targets.map((t) => t.stop()), controlApart ? control.stop() : undefined]).finally(() => process.exit(1));
  });
}
const svc = await startServiceProcess({
  controlUrl,
  targetUrl: target.adminUrl,
  upstreams: `api.airtable.com=${ready.airtable},api.stripe.com=${ready.stripe}`,
  roles: 'api,sync,decoder,proxy,events',
  publicApi: pings,
  // The operator's settings given to the bench (TRIBUTARY_AIRTABLE_PACED_CYCLE_S=0: no pacing).
  env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('TRIBUTARY_') && k !== 'TRIBUTARY_LOG_LEVEL')) as Record<string, string>,
});

interface Made {
  syncId: string;
  token: string;
  reader: string;
}
const accounts: string[] = [];
async function accountToken(n: number): Promise<string> {
  // Ten syncs an account, under the default limit of twenty.
  const index = Math.floor(n / 10);
  accounts[index] ??= (await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: `fleet ${index}` })).api_token;
  return accounts[index]!;
}
async function inBatches<T>(count: number, make: (n: number) => Promise<T>, width = 4): Promise<T[]> {
  const out: T[] = [];
  for (let start = 0; start < count; start += width) {
    if (start > 0 && start % 100 === 0) console.log(`  ${start} of ${count} made (${((Date.now() - started) / 1000).toFixed(0)} s)`);
    out.push(...(await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, k) => make(start + k)))));
  }
  return out;
}

/** Joins the servers from..to (exclusive) to the pool, and drains the ones before `from`. */
async function useServers(from: number, to: number): Promise<void> {
  const { data: servers } = await api(svc.api, svc.adminToken, 'GET', '/api/servers');
  for (const server of servers) if (from > 0) await api(svc.api, svc.adminToken, 'PATCH', `/api/servers/${server.id}`, { draining: true });
  for (const t of targets.slice(Math.max(from, 1), to)) {
    await api(svc.api, svc.adminToken, 'POST', '/api/servers', { url: t.adminUrl, region: 'us-west-2', capacity: 1000 });
  }
  if (from === 0) for (const server of servers) await api(svc.api, svc.adminToken, 'PATCH', `/api/servers/${server.id}`, { capacity: 1000 });
}

const started = Date.now();
await useServers(0, airtableServers);
const airtable: Made[] = await inBatches(airtableSyncs, async (n) => {
  const token = await accountToken(n);
  const base = ready.bases[n]!;
  const sync = await api(svc.api, token, 'POST', '/api/syncs', { kind: 'airtable', base_id: base.id, api_key: base.token });
  return { syncId: sync.id, token, reader: sync.database.url };
});
if (stripeServers > 0) await useServers(airtableServers, airtableServers + stripeServers);
const stripe: Made[] = await inBatches(stripeSyncs, async (n) => {
  const token = await accountToken(airtableSyncs + n + 10 * 1000);
  const sync = await api(svc.api, token, 'POST', '/api/syncs', { kind: 'stripe', api_key: ready.keys[n]! });
  return { syncId: sync.id, token, reader: sync.database.url };
});
console.log(`${airtableSyncs} Airtable + ${stripeSyncs} Stripe syncs created in ${((Date.now() - started) / 1000).toFixed(0)} s`);
for (const made of [...airtable, ...stripe]) {
  for (;;) {
    const sync = await api(svc.api, made.token, 'GET', `/api/syncs/${made.syncId}`);
    if (sync.status.completed_at) break;
    await sleep(500);
  }
}
console.log(`every first cycle done after ${((Date.now() - started) / 1000).toFixed(0)} s; settling ${settleSeconds} s`);
await sleep(settleSeconds * 1000);

// --- measuring ----------------------------------------------------------------------------------
type Proc = ProcessSample;
const processes = processTable;
function pss(pid: number): number {
  try {
    return Number(/Pss:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}
async function postmasterOf(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const stat = readFileSync(`/proc/${rows[0]!.pid}/stat`, 'utf8');
  await client.end();
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}
const targetMasters = await Promise.all(targets.map((t) => postmasterOf(t.adminUrl)));
const controlMaster = await postmasterOf(controlUrl);
const isMaster = (pid: number) => targetMasters.includes(pid) || pid === controlMaster;
/** Which servers a process of a sync server belongs to, when the Stripe syncs have their own. */
const group = (ppid: number) =>
  stripeServers === 0 || ppid === controlMaster ? '' : targetMasters.indexOf(ppid) < airtableServers ? ' (Airtable servers)' : ' (Stripe servers)';
const readers = new Set([...airtable, ...stripe].map((m) => decodeURIComponent(new URL(m.reader).username)));

/** A PostgreSQL process's kind, from its title and server. */
function kind(proc: Proc): string | undefined {
  if (!isMaster(proc.ppid)) return undefined;
  const words = proc.title.replace(/^postgres:\s+/, '').split(/\s+/);
  if (words[0] === 'walsender') return `walsenders${group(proc.ppid)}`;
  const apart = controlApart && proc.ppid === controlMaster ? 'control server: ' : '';
  if (readers.has(words[0]!)) return 'bench reads (not counted)';
  if (words[1] === controlDb) return `${apart}control database backends`;
  if (words.length >= 3 && /\(\d+\)$|^\[local\]/.test(words[2]!)) return `sync database backends${group(proc.ppid)}`;
  return `${apart}other server processes${group(proc.ppid)}`;
}

function snapshot() {
  const all = processes();
  return { all, service: all.get(svc.child.pid!)?.cpu ?? 0, at: Date.now() };
}
type Snapshot = ReturnType<typeof snapshot>;
const kindOf = (pid: number, proc: Proc) => kind(proc) ?? (isMaster(pid) ? 'other server processes' : undefined);
/**
 * PostgreSQL's CPU between two snapshots by process kind. A backend that exits meanwhile
 * takes its CPU time out of /proc; its postmaster's reaped time gets it, so what the ended
 * ones spent in the window is the postmasters' reaped time less what they had spent before.
 */
function cpuByKind(before: Snapshot, after: Snapshot): Map<string, { cpu: number; count: number }> {
  const out = new Map<string, { cpu: number; count: number }>();
  const add = (k: string, cpu: number, count: number) => {
    const entry = out.get(k) ?? { cpu: 0, count: 0 };
    entry.cpu += cpu;
    entry.count += count;
    out.set(k, entry);
  };
  let ended = 0;
  for (const [pid, proc] of after.all) {
    const k = kindOf(pid, proc);
    if (!k) continue;
    const earlier = before.all.get(pid);
    add(k, proc.cpu - (earlier && earlier.title === proc.title ? earlier.cpu : 0), 1);
    if (isMaster(pid)) ended += proc.endedChildren - (earlier?.endedChildren ?? 0);
  }
  for (const [pid, proc] of before.all) if (!after.all.has(pid) && kindOf(pid, proc)) ended -= proc.cpu;
  add('processes that ended in the window', ended, 0);
  return out;
}
function pssByKind(): Map<string, number> {
  const out = new Map<string, number>();
  for (const [pid, proc] of processes()) {
    const k = kind(proc) ?? (isMaster(pid) ? 'other server processes' : undefined);
    if (k) out.set(k, (out.get(k) ?? 0) + pss(pid));
  }
  return out;
}

const clients = new Map<number, pg.Pool>();
async function readerOf(n: number): Promise<pg.Pool> {
  let client = clients.get(n);
  if (!client) {
    // Kept open (no idle timeout): a reconnection per change would be the bench's own backend churn.
    client = new pg.Pool({ connectionString: airtable[n]!.reader, max: 2, idleTimeoutMillis: 0 });
    clients.set(n, client);
  }
  return client;
}
async function until(n: number, sql: string, params: unknown[], wanted: boolean, since: number): Promise<number> {
  const client = await readerOf(n);
  for (;;) {
    const { rows } = await client.query(sql, params);
    if (rows.length > 0 === wanted) return Date.now() - since;
    if (Date.now() - since > 120_000) {
      const sync = await api(svc.api, airtable[n]!.token, 'GET', `/api/syncs/${airtable[n]!.syncId}`);
      throw new Error(`base ${n}: a change never arrived (${sql} ${params.join(' ')}); the sync's status: ${JSON.stringify(sync.status)}`);
    }
    await sleep(50);
  }
}
const lags: Record<'edit' | 'create' | 'delete' | 'sweep-only', number[]> = { edit: [], create: [], delete: [], 'sweep-only': [] };
/** Records created and seen in their database: the ones a delete may take. */
const created: Array<{ n: number; record: string }> = [];
async function oneChange(i: number): Promise<void> {
  const op = i % 4 === 3 && created.length > 0 ? 'delete' : i % 4 === 1 ? 'create' : 'edit';
  const taken = op === 'delete' ? created.shift()! : undefined;
  const n = taken ? taken.n : (i * 7919) % airtableSyncs;
  const done = await ask(taken ? `delete ${n} ${taken.record}` : `${op} ${n}`);
  if (done.error) throw new Error(done.error);
  const lag =
    op === 'delete'
      ? await until(n, 'SELECT 1 FROM projects WHERE id = $1', [done.record], false, done.at)
      : await until(n, 'SELECT 1 FROM projects WHERE id = $1 AND name = $2', [done.record, done.value], true, done.at);
  lags[op].push(lag);
  if (op === 'create') created.push({ n, record: done.record });
}

/**
 * A difference only a sweep can find (what change capture cannot see: a computed value changed
 * in another record, a lapsed webhook): a row's name changed in the sync's database behind the
 * sync's back, timed until a sweep has put the upstream's value back.
 */
async function oneSweepProbe(i: number): Promise<void> {
  const n = (i * 104_729 + 17) % airtableSyncs;
  const reader = new URL(airtable[n]!.reader);
  const server = targets.find((t) => new URL(t.adminUrl).port === reader.port)!;
  const owner = new pg.Client({ connectionString: withDatabase(server.adminUrl, reader.pathname.slice(1)) });
  await owner.connect();
  const { rows } = await owner.query<{ id: string; name: string }>("SELECT id, name FROM projects WHERE name NOT LIKE 'probe %' ORDER BY random() LIMIT 1");
  const at = Date.now();
  await owner.query('UPDATE projects SET name = $2 WHERE id = $1', [rows[0]!.id, `probe ${i}`]);
  await owner.end();
  lags['sweep-only'].push(await until(n, 'SELECT 1 FROM projects WHERE id = $1 AND name = $2', [rows[0]!.id, rows[0]!.name], true, at));
}

/** The sync servers' WAL positions summed, and commits so far in the control database and in the rest. */
async function walAndCommits(): Promise<{ lsn: bigint; control: number; others: number; sessions: number }> {
  const each = await Promise.all(targets.map((t) => walAndCommitsOf(t.adminUrl)));
  if (controlApart) each.push({ ...(await walAndCommitsOf(controlUrl)), lsn: 0n });
  return each.reduce((a, b) => ({ lsn: a.lsn + b.lsn, control: a.control + b.control, others: a.others + b.others, sessions: a.sessions + b.sessions }));
}
async function walAndCommitsOf(url: string): Promise<{ lsn: bigint; control: number; others: number; sessions: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ lsn: string; control: string; others: string; sessions: string }>(
    `SELECT (pg_current_wal_lsn() - '0/0')::text AS lsn,
            coalesce(sum(xact_commit) FILTER (WHERE datname = $1), 0)::text AS control,
            coalesce(sum(xact_commit) FILTER (WHERE datname <> $1), 0)::text AS others,
            coalesce(sum(sessions), 0)::text AS sessions
       FROM pg_stat_database`,
    [controlDb],
  );
  await client.end();
  return { lsn: BigInt(rows[0]!.lsn.split('.')[0]!), control: Number(rows[0]!.control), others: Number(rows[0]!.others), sessions: Number(rows[0]!.sessions) };
}

/** What the sync servers' WAL between two positions was made of, by record type (pg_walinspect). */
async function walPositions(): Promise<string[]> {
  return Promise.all(
    targets.map(async (t) => {
      const client = new pg.Client({ connectionString: t.adminUrl });
      await client.connect();
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      await client.end();
      return rows[0]!.lsn;
    }),
  );
}
async function walMakeup(from: string[], to: string[]): Promise<Array<[string, number]>> {
  const bytes = new Map<string, number>();
  for (const [i, t] of targets.entries()) {
    const client = new pg.Client({ connectionString: t.adminUrl });
    await client.connect();
    const { rows } = await client.query<{ record_type: string; combined_size: string }>(
      'SELECT "resource_manager/record_type" AS record_type, combined_size::text FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0',
      [from[i], to[i]],
    );
    await client.end();
    for (const r of rows) bytes.set(r.record_type, (bytes.get(r.record_type) ?? 0) + Number(r.combined_size));
  }
  return [...bytes].sort((a, b) => b[1] - a[1]);
}

/** Rows written so far in the control database, by table: what its commits are made of. */
async function controlWrites(): Promise<Map<string, number>> {
  const client = new pg.Client({ connectionString: controlUrl });
  await client.connect();
  const { rows } = await client.query<{ relname: string; n: string }>(
    'SELECT relname, (n_tup_ins + n_tup_upd + n_tup_del)::text AS n FROM pg_stat_user_tables',
  );
  await client.end();
  return new Map(rows.map((r) => [r.relname, Number(r.n)]));
}

/**
 * The control server's statements by execution time over the window, nested ones (inside the
 * quota functions) too (pg_stat_statements, which costs the server some CPU of its own:
 * --statements 1, with --control-apart 1 only).
 */
async function controlStatements(reset: boolean): Promise<string[]> {
  if (!statementsOn) return [];
  const client = new pg.Client({ connectionString: controlUrl });
  await client.connect();
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  if (reset) {
    await client.query('SELECT pg_stat_statements_reset()');
    await client.end();
    return [];
  }
  const { rows } = await client.query<{ ms: number; calls: string; toplevel: boolean; query: string }>(
    `SELECT total_exec_time + total_plan_time AS ms, calls::text, toplevel, query FROM pg_stat_statements s
      JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY total_exec_time + total_plan_time DESC LIMIT 12`,
    [controlDb],
  );
  await client.end();
  return rows.map(
    (r) =>
      `${(r.ms / 1000).toFixed(1).padStart(7)} s ${String(r.calls).padStart(8)} calls${r.toplevel ? '' : ' (nested)'}  ${r.query.replace(/\s+/g, ' ').slice(0, 110)}`,
  );
}

const walFrom = await walPositions();
await controlStatements(true);
const controlBefore = await controlWrites();
const walBefore = await walAndCommits();
const before = snapshot();
const fakeBefore = await ask('stats');
const pending: Promise<void>[] = [];
let probes = 0;
for (let i = 0; Date.now() - before.at < seconds * 1000; i++) {
  pending.push(oneChange(i));
  // Sweep probes spread over the window's first half: each may wait a whole paced cycle.
  if (probes < sweepProbes && i % Math.max(1, Math.floor((seconds * changeRate) / 2 / sweepProbes)) === 0) pending.push(oneSweepProbe(probes++));
  await sleep(1000 / changeRate);
}
const after = snapshot();
const walAfter = await walAndCommits();
const walTo = await walPositions();
const controlAfter = await controlWrites();
const statements = await controlStatements(false);
const memory = pssByKind();
const servicePss = pss(svc.child.pid!);
await Promise.all(pending);
const fakeAfter = await ask('stats');

// --- report -------------------------------------------------------------------------------------
const wall = (after.at - before.at) / 1000;
const syncs = airtableSyncs + stripeSyncs;
const cores = (cpu: number) => (cpu / wall).toFixed(2);
const mbOf = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
console.log(
  `\n${airtableSyncs} Airtable syncs (${records} records each) + ${stripeSyncs} idle Stripe syncs${pings ? ', Airtable pings' : ''}, control database ${controlApart ? 'on a server of its own' : 'on the target server'}, ${airtableServers} sync server(s)${stripeServers ? ` + ${stripeServers} for the Stripe syncs` : ''}, ${wall.toFixed(0)} s measured`,
);
const serviceCpu = after.service - before.service;
let pgCpu = 0;
let pgPss = 0;
const rows: string[] = [];
for (const [k, entry] of [...cpuByKind(before, after)].sort((a, b) => b[1].cpu - a[1].cpu)) {
  const spent = entry.cpu;
  const memoryOf = memory.get(k) ?? 0;
  if (!k.startsWith('bench')) {
    pgCpu += spent;
    pgPss += memoryOf;
  }
  rows.push(`  ${k.padEnd(42)} ${cores(spent).padStart(5)} cores  ${mbOf(memoryOf).padStart(8)} PSS  ${String(entry.count).padStart(4)} processes`);
}
console.log(`  service (one process)                      ${cores(serviceCpu).padStart(5)} cores  ${mbOf(servicePss).padStart(8)} PSS`);
console.log(`  PostgreSQL, all                            ${cores(pgCpu).padStart(5)} cores  ${mbOf(pgPss).padStart(8)} PSS`);
for (const row of rows) console.log(row);
console.log(
  `  service + PostgreSQL: ${cores(serviceCpu + pgCpu)} cores, ${(((serviceCpu + pgCpu) / wall / syncs) * 1000).toFixed(2)} millicores and ${mbOf((servicePss + pgPss) / syncs)} a sync`,
);
console.log(
  `  sync servers' WAL ${(Number(walAfter.lsn - walBefore.lsn) / wall / 1024).toFixed(0)} kB/s; commits/s: control database ${((walAfter.control - walBefore.control) / wall).toFixed(0)}${controlApart ? ' (its own server)' : ''}, other databases ${((walAfter.others - walBefore.others) / wall).toFixed(0)}; new sessions/s (every server) ${((walAfter.sessions - walBefore.sessions) / wall).toFixed(1)}`,
);
const makeup = await walMakeup(walFrom, walTo);
const walTotal = makeup.reduce((sum, [, b]) => sum + b, 0) || 1;
console.log(
  `  WAL by record: ${makeup
    .slice(0, 8)
    .map(([type, b]) => `${type} ${((b / walTotal) * 100).toFixed(0)} %`)
    .join(', ')}`,
);
const controlTables = [...controlAfter]
  .map(([table, n]) => [table, n - (controlBefore.get(table) ?? 0)] as const)
  .filter(([, n]) => n > 0)
  .sort((a, b) => b[1] - a[1]);
console.log(
  `  control database rows written/s: ${controlTables
    .slice(0, 8)
    .map(([table, n]) => `${table} ${(n / wall).toFixed(0)}`)
    .join(', ')}`,
);
if (statements.length) console.log(`  control database statements by time over the window:\n${statements.map((line) => `    ${line}`).join('\n')}`);
console.log(`  upstream requests ${((fakeAfter.requests - fakeBefore.requests) / wall).toFixed(0)}/s, 429s ${fakeAfter.rateLimited - fakeBefore.rateLimited}`);
for (const op of ['edit', 'create', 'delete', 'sweep-only'] as const) {
  const list = lags[op];
  if (!list.length) continue;
  console.log(
    `  ${op} lag (${list.length}): p50 ${(percentile(list, 50) / 1000).toFixed(2)} s, p99 ${(percentile(list, 99) / 1000).toFixed(2)} s, max ${(Math.max(...list) / 1000).toFixed(2)} s`,
  );
}
const everything = [...lags.edit, ...lags.create, ...lags.delete]; // sweep-only probes are reported apart
console.log(
  `  all changes (${everything.length}): p50 ${(percentile(everything, 50) / 1000).toFixed(2)} s, p99 ${(percentile(everything, 99) / 1000).toFixed(2)} s`,
);

for (const client of clients.values()) await client.end();
await svc.stop();
fakes.stdin!.end();
for (const t of targets) await t.stop();
if (controlApart) await control.stop();
process.exit(0);
