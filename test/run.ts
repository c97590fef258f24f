/**
 * `npm test`: starts one real PostgreSQL (embedded binaries, wal_level=logical) for the
 * run, then runs every test file in its own process (uvu), several at a time, and closes
 * with one "N passed, N failed" line. Kafka is started by the suites that need it.
 *
 *   npm test                      every file under test/ but the long runs
 *   npm test -- test/api          only files whose path contains "test/api"
 *
 * The long runs have scripts of their own (docs/testing.md): `npm run test:sim` (the traffic
 * simulation's CI profile), `test:fleet` (the Procfile's roles as eight processes) and
 * `test:image` (the container image); `npm test` leaves them out.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createLogger } from '../src/log.ts';
import { freePort } from './harness/ports.ts';
import { CONTROL_TEMPLATE } from './harness/postgres.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { ident, withClient, withDatabase } from '../src/db/sql.ts';
import { failureWindow } from './harness/failure-log.ts';
import { NOTE } from './harness/note.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FILE_TIMEOUT_MS = Number(process.env.TEST_FILE_TIMEOUT_MS || 5 * 60_000);
const CONCURRENCY = Number(process.env.TEST_CONCURRENCY || 5);
const ARTIFACTS = path.join(root, 'test-artifacts');
const EXIT_GRACE_MS = 3000;

/** The long runs: each has its own script and runs only when named (`npm test` leaves them out). */
const LONG_RUNS = ['test/container/', 'test/simulation.test.ts', 'test/fleet.test.ts'];
/**
 * Files that check an upstream's rate limit to the millisecond, against a fake in a process of
 * its own (harness/fake-process.ts): each starts once every other file has started, with at
 * most one other file beside it. Beside four other files and a busy core, the limiter's sends
 * and the fake's reading of them are held up by tens of ms at a time, more than the limiter's
 * 20 ms margin, and the fake counts a burst that was never sent.
 */
const RATE_FILES = new Set([
  'test/airtable.per-user.test.ts',
  'test/hostile.quota.test.ts',
  'test/proxy.quota.test.ts',
  'test/proxy.stripe-share.test.ts',
  'test/quota.stripe-share.test.ts',
  // Its fake is in the test's own process: twelve bases at full speed drew a 429 in a CI run.
  'test/quota.token.test.ts',
]);
const RATE_CONCURRENCY = 2;

async function testFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map(async (entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return entry.name === 'harness' ? [] : testFiles(full);
      return entry.name.endsWith('.test.ts') ? [full] : [];
    }),
  );
  return nested.flat().sort();
}

interface FileResult {
  file: string;
  passed: number;
  failed: number;
  skipped: number;
  ok: boolean;
  output: string;
  seconds: number;
  /** When the first test of the file failed (uvu's ✘), or when the file ended. */
  failedAt: number;
}

/** Test files running now; Ctrl-C of the run ends them (their process groups do not hear the terminal). */
const running = new Set<ChildProcess>();

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    child.kill('SIGKILL'); // the group is gone already
  }
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    // No further file starts; the run's PostgreSQL is stopped as after a whole run.
    interrupted = true;
    for (const child of running) killGroup(child);
  });
}

function runFile(file: string, env: NodeJS.ProcessEnv): Promise<FileResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    // Once its tests are done, a file has a few seconds for what it left running to end or
    // fail loudly (a late error still fails it); a stray timer or socket does not hold it up.
    const suite = JSON.stringify([{ name: path.relative(root, file), file }]);
    const script = `import { run } from 'uvu/run'; await run(${suite}, { bail: false }); setTimeout(() => process.exit(), ${EXIT_GRACE_MS}).unref();`;
    // TEST_TIMINGS=<file>: each test's time too (test/harness/timings.ts).
    const timings = env.TEST_TIMINGS ? ['--import', path.join(root, 'test', 'harness', 'timings.ts')] : [];
    const child = spawn(process.execPath, ['--import', 'tsx', ...timings, '--input-type=module', '-e', script], {
      cwd: root,
      env: { ...env, FORCE_COLOR: '0', TEST_TIMINGS_NAME: path.relative(root, file) },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own: a file killed for taking too long takes its servers with it.
      detached: true,
    });
    running.add(child);
    let output = '';
    let failedAt: number | undefined;
    const take = (chunk: Buffer) => {
      const text = chunk.toString();
      if (failedAt === undefined && text.includes('✘')) failedAt = Date.now();
      output += text;
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const timer = setTimeout(() => {
      output += `\n[test/run] ${file} exceeded ${FILE_TIMEOUT_MS} ms; killed\n`;
      killGroup(child);
    }, FILE_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      killGroup(child); // what the file started and did not stop goes with it
      const count = (label: string) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(output)?.[1] ?? 0);
      const total = count('Total');
      const passed = count('Passed');
      const skipped = count('Skipped');
      // A file that crashed before uvu's summary counts as one failure, not as nothing.
      const failed = total - passed - skipped || (code === 0 ? 0 : 1);
      const seconds = (Date.now() - started) / 1000;
      resolve({ file, passed, failed, skipped, ok: code === 0 && failed === 0, output, seconds, failedAt: failedAt ?? Date.now() });
    });
  });
}

/** Keeps a file's service log under test-artifacts/logs/ (every file's with TEST_KEEP_LOGS=1, a failed one's always). */
async function keepLog(name: string, logFile: string): Promise<string> {
  const kept = path.join(ARTIFACTS, 'logs', `${name.replaceAll('/', '_')}.log`);
  await mkdir(path.dirname(kept), { recursive: true });
  await copyFile(logFile, kept).catch(() => undefined);
  return kept;
}

/** The service log lines around a failed file's failure, and the whole log kept under test-artifacts/logs/. */
async function serviceLogReport(name: string, logFile: string, failedAt: number): Promise<string> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  if (!text) return '';
  const kept = await keepLog(name, logFile);
  const { lines, total } = failureWindow(text.split('\n'), failedAt);
  const rel = path.relative(root, kept);
  return `--- the service's log around the failure: ${lines.length} of ${total} lines (all of them: ${rel}) ---\n${lines.join('\n')}\n--- end of the service's log ---\n`;
}

function timeTable(results: FileResult[], wall: number): string {
  const rows = [...results].sort((a, b) => b.seconds - a.seconds);
  const busy = results.reduce((n, r) => n + r.seconds, 0);
  return [
    `# ${results.length} files, ${wall.toFixed(0)} s of wall time, ${busy.toFixed(0)} s of file time, ${CONCURRENCY} at a time (the rate files ${RATE_CONCURRENCY})`,
    'seconds\ttests\tfile',
    ...rows.map((r) => `${r.seconds.toFixed(1)}\t${r.passed + r.failed}\t${path.relative(root, r.file)}`),
  ].join('\n');
}

/**
 * Each file's time in seconds, from `test/file-times.tsv` (a run's table, committed; the
 * runner writes a fresh one to test-artifacts/test-times.tsv): only to order the files.
 */
async function fileTimes(): Promise<Map<string, number>> {
  const text = await readFile(path.join(root, 'test', 'file-times.tsv'), 'utf8').catch(() => '');
  const times = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [seconds, , file] = line.split('\t');
    if (file && Number.isFinite(Number(seconds))) times.set(file, Number(seconds));
  }
  return times;
}

async function main(): Promise<number> {
  const filters = process.argv.slice(2);
  const relative = (file: string) => path.relative(root, file);
  const files = (await testFiles(path.join(root, 'test'))).filter((file) =>
    filters.length === 0 ? !LONG_RUNS.some((long) => relative(file).startsWith(long)) : filters.some((f) => relative(file).includes(f.replace(/^\.\//, ''))),
  );
  if (files.length === 0) {
    process.stderr.write('no test files matched\n');
    return 1;
  }

  const runStarted = Date.now();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-test-pg-'));
  const logs = await mkdtemp(path.join(os.tmpdir(), 'tributary-test-logs-'));
  const pg = await startEmbeddedPostgres({ dir, port: await freePort(), logger: createLogger({ level: 'warn' }) });
  // Test services copy their control database from a template migrated once for the run.
  const quiet = createLogger({ level: 'warn' });
  await withClient(pg.adminUrl, (admin) => admin.query(`CREATE DATABASE ${ident(CONTROL_TEMPLATE)}`));
  await migrateControlDatabase(withDatabase(pg.adminUrl, CONTROL_TEMPLATE), quiet);
  const env = {
    ...process.env,
    TEST_PG_ADMIN_URL: pg.adminUrl,
    TEST_CONTROL_TEMPLATE: CONTROL_TEMPLATE,
    TRIBUTARY_LOG_LEVEL: process.env.TRIBUTARY_LOG_LEVEL ?? 'warn',
    // Every Node process of the run (files, services, CLI calls, fakes) shares compiled code.
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? path.join(os.tmpdir(), 'tributary-test-node-cache'),
  };

  const results: FileResult[] = [];
  // The slowest files first (by the measured table), so that no long file starts last and
  // holds the run up alone.
  const known = await fileTimes();
  const byTime = [...files].sort((a, b) => (known.get(relative(b)) ?? 0) - (known.get(relative(a)) ?? 0));
  const runOne = async (file: string) => {
    const name = relative(file);
    const logFile = path.join(logs, `${name.replaceAll('/', '_')}.log`);
    const result = await runFile(file, { ...env, TEST_SERVICE_LOG: logFile });
    results.push(result);
    const mark = result.ok ? 'ok  ' : 'FAIL';
    let report = `${mark} ${name} (${result.passed} passed, ${result.failed} failed, ${result.seconds.toFixed(1)} s)\n`;
    if (!result.ok || process.env.TEST_VERBOSE) report += `${result.output}\n`;
    // What a file says of a run that passed too (the simulation's seed and how to replay it).
    else
      report += result.output
        .split('\n')
        .filter((line) => line.startsWith(NOTE))
        .map((line) => `  ${line.slice(NOTE.length)}\n`)
        .join('');
    if (!result.ok) report += await serviceLogReport(name, logFile, result.failedAt);
    else if (process.env.TEST_KEEP_LOGS) await keepLog(name, logFile);
    process.stdout.write(report);
  };
  const main = byTime.filter((file) => !RATE_FILES.has(relative(file)));
  const rate = byTime.filter((file) => RATE_FILES.has(relative(file)));
  const active = new Set<Promise<void>>();
  // The rate files start once every other file has started, while at most one other runs.
  const next = () => {
    if (interrupted) return undefined;
    if (main.length > 0) return active.size < CONCURRENCY ? main.shift() : undefined;
    return active.size < Math.min(CONCURRENCY, RATE_CONCURRENCY) ? rate.shift() : undefined;
  };
  try {
    for (;;) {
      for (let file = next(); file; file = next()) {
        const running = runOne(file).finally(() => active.delete(running));
        active.add(running);
      }
      if (active.size === 0) break;
      await Promise.race(active);
    }
  } finally {
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
    await rm(logs, { recursive: true, force: true });
  }

  const table = timeTable(results, (Date.now() - runStarted) / 1000);
  await mkdir(ARTIFACTS, { recursive: true });
  await writeFile(path.join(ARTIFACTS, 'test-times.tsv'), `${table}\n`);
  const passed = results.reduce((n, r) => n + r.passed, 0);
  const failed = results.reduce((n, r) => n + r.failed, 0);
  const skipped = results.reduce((n, r) => n + r.skipped, 0);
  const slowest = table.split('\n').slice(0, 12).join('\n');
  process.stdout.write(`\n${slowest}\n(every file's time: test-artifacts/test-times.tsv)\n`);
  process.stdout.write(`\n${results.length} files\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  if (interrupted) {
    process.stdout.write('interrupted\n');
    return 130;
  }
  return failed === 0 && results.every((r) => r.ok) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`test run failed to start: ${(error as Error).message ?? String(error)}\n`);
    process.exit(1);
  },
);
