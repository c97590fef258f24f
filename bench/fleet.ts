/**
 * Many syncs on one machine: where the CPU and memory go, and the change lag.
 *
 *   node --import tsx bench/fleet.ts [--airtable 40] [--stripe 0] [--records 300]
 *        [--seconds 60] [--changes-per-second 2] [--control-apart 0|1]
 *
 * N Airtable syncs (bases of --records records in three tables, each base its own user and
 * token, default share) and M idle Stripe syncs, the whole service in one process
 * (`tributary run`, every role), the fakes in a process of their own. After every first
 * cycle and a settling minute, for --seconds it makes edits, creates and deletes in random
 * bases and measures each one's lag (upstream change to the row in the sync's database, read
 * as the sync's reader), and the CPU and PSS of the service and of PostgreSQL by process
 * kind: walsenders, the sync databases' backends, the control database's backends, the rest.
 * With --control-apart 1 the control database has a PostgreSQL server of its own.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { api, arg, percentile, root, sleep, startPostgres, startServiceProcess } from './lib.ts';

const airtableSyncs = arg('airtable', 40);
const stripeSyncs = arg('stripe', 0);
const records = arg('records', 300);
const seconds = arg('seconds', 60);
const changeRate = arg('changes-per-second', 2);
const controlApart = arg('control-apart', 0) === 1;
const settleSeconds = arg('settle', 60);

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
const target = await startPostgres();
const control = controlApart ? await startPostgres() : target;
const controlUrl = await control.freshDatabase('ctl');
const controlDb = new URL(controlUrl).pathname.slice(1);
// Stopped early (Ctrl-C): leave no server behind.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    fakes.kill('SIGKILL');
    void Promise.all([target.stop(), controlApart ? control.stop() : undefined]).finally(() => process.exit(1));
  });
}
const svc = await startServiceProcess({
  controlUrl,
  targetUrl: target.adminUrl,
  upstreams: `api.airtable.com=${ready.airtable},api.stripe.com=${ready.stripe}`,
  roles: 'api,sync,decoder,proxy,events',
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

const started = Date.now();
const airtable: Made[] = await inBatches(airtableSyncs, async (n) => {
  const token = await accountToken(n);
  const base = ready.bases[n]!;
  const sync = await api(svc.api, token, 'POST', '/api/syncs', { kind: 'airtable', base_id: base.id, api_key: base.token });
  return { syncId: sync.id, token, reader: sync.database.url };
});
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
interface Proc {
  title: string;
  ppid: number;
  cpu: number;
}
function processes(): Map<number, Proc> {
  const found = new Map<number, Proc>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      found.set(Number(entry), { title, ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / 100 });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
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
const targetMaster = await postmasterOf(target.adminUrl);
const controlMaster = await postmasterOf(controlUrl);
const readers = new Set([...airtable, ...stripe].map((m) => decodeURIComponent(new URL(m.reader).username)));

/** A PostgreSQL process's kind, from its title and server. */
function kind(proc: Proc): string | undefined {
  if (proc.ppid !== targetMaster && proc.ppid !== controlMaster) return undefined;
  const words = proc.title.replace(/^postgres:\s+/, '').split(/\s+/);
  if (words[0] === 'walsender') return 'walsenders';
  const apart = controlApart && proc.ppid === controlMaster ? 'control server: ' : '';
  if (readers.has(words[0]!)) return 'bench reads (not counted)';
  if (words[1] === controlDb) return `${apart}control database backends`;
  if (words.length >= 3 && /\(\d+\)$|^\[local\]/.test(words[2]!)) return 'sync database backends';
  return `${apart}other server processes`;
}

function snapshot() {
  const all = processes();
  const byKind = new Map<string, { cpu: number; pss: number; count: number }>();
  for (const [pid, proc] of all) {
    const k = kind(proc) ?? (pid === targetMaster || pid === controlMaster ? 'other server processes' : undefined);
    if (!k) continue;
    const entry = byKind.get(k) ?? { cpu: 0, pss: 0, count: 0 };
    entry.cpu += proc.cpu;
    entry.count += 1;
    byKind.set(k, entry);
  }
  return { all, byKind, service: all.get(svc.child.pid!)?.cpu ?? 0, at: Date.now() };
}
function pssByKind(): Map<string, number> {
  const out = new Map<string, number>();
  for (const [pid, proc] of processes()) {
    const k = kind(proc) ?? (pid === targetMaster || pid === controlMaster ? 'other server processes' : undefined);
    if (k) out.set(k, (out.get(k) ?? 0) + pss(pid));
  }
  return out;
}

const clients = new Map<number, pg.Pool>();
async function readerOf(n: number): Promise<pg.Pool> {
  let client = clients.get(n);
  if (!client) {
    client = new pg.Pool({ connectionString: airtable[n]!.reader, max: 2 });
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
const lags: Record<'edit' | 'create' | 'delete', number[]> = { edit: [], create: [], delete: [] };
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

/** The target server's WAL position, and commits so far in the control database and in the rest. */
async function walAndCommits(): Promise<{ lsn: bigint; control: number; others: number }> {
  const client = new pg.Client({ connectionString: target.adminUrl });
  await client.connect();
  const { rows } = await client.query<{ lsn: string; control: string; others: string }>(
    `SELECT (pg_current_wal_lsn() - '0/0')::text AS lsn,
            coalesce(sum(xact_commit) FILTER (WHERE datname = $1), 0)::text AS control,
            coalesce(sum(xact_commit) FILTER (WHERE datname <> $1), 0)::text AS others
       FROM pg_stat_database`,
    [controlDb],
  );
  await client.end();
  return { lsn: BigInt(rows[0]!.lsn.split('.')[0]!), control: Number(rows[0]!.control), others: Number(rows[0]!.others) };
}

const walBefore = await walAndCommits();
const before = snapshot();
const fakeBefore = await ask('stats');
const pending: Promise<void>[] = [];
for (let i = 0; Date.now() - before.at < seconds * 1000; i++) {
  pending.push(oneChange(i));
  await sleep(1000 / changeRate);
}
const after = snapshot();
const walAfter = await walAndCommits();
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
  `\n${airtableSyncs} Airtable syncs (${records} records each) + ${stripeSyncs} idle Stripe syncs, control database ${controlApart ? 'on a server of its own' : 'on the target server'}, ${wall.toFixed(0)} s measured`,
);
const serviceCpu = after.service - before.service;
let pgCpu = 0;
let pgPss = 0;
const rows: string[] = [];
for (const [k, entry] of [...after.byKind].sort((a, b) => b[1].cpu - a[1].cpu)) {
  const spent = entry.cpu - (before.byKind.get(k)?.cpu ?? 0);
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
  `  target server WAL ${(Number(walAfter.lsn - walBefore.lsn) / wall / 1024).toFixed(0)} kB/s; commits/s: control database ${((walAfter.control - walBefore.control) / wall).toFixed(0)}${controlApart ? ' (not on this server)' : ''}, other databases ${((walAfter.others - walBefore.others) / wall).toFixed(0)}`,
);
console.log(`  upstream requests ${((fakeAfter.requests - fakeBefore.requests) / wall).toFixed(0)}/s, 429s ${fakeAfter.rateLimited - fakeBefore.rateLimited}`);
for (const op of ['edit', 'create', 'delete'] as const) {
  const list = lags[op];
  if (!list.length) continue;
  console.log(
    `  ${op} lag (${list.length}): p50 ${(percentile(list, 50) / 1000).toFixed(2)} s, p99 ${(percentile(list, 99) / 1000).toFixed(2)} s, max ${(Math.max(...list) / 1000).toFixed(2)} s`,
  );
}
const everything = [...lags.edit, ...lags.create, ...lags.delete];
console.log(
  `  all changes (${everything.length}): p50 ${(percentile(everything, 50) / 1000).toFixed(2)} s, p99 ${(percentile(everything, 99) / 1000).toFixed(2)} s`,
);

for (const client of clients.values()) await client.end();
await svc.stop();
fakes.stdin!.end();
await target.stop();
if (controlApart) await control.stop();
process.exit(0);
