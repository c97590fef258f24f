/**
 * `npm test`: starts one real PostgreSQL (embedded binaries, wal_level=logical) for the
 * run, then runs every test file in its own process (uvu), two at a time, and closes
 * with one "N passed, N failed" line. Kafka is started by the suites that need it.
 *
 *   npm test                      every file under test/
 *   npm test -- test/api          only files whose path contains "test/api"
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createLogger } from '../src/log.ts';
import { freePort } from './harness/ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FILE_TIMEOUT_MS = Number(process.env.TEST_FILE_TIMEOUT_MS || 10 * 60_000);
const CONCURRENCY = Number(process.env.TEST_CONCURRENCY || 2);
/**
 * Files that run alone, after the others: the traffic simulation starts three PostgreSQL
 * servers, Kafka, seven service processes and both upstreams on a 2-core machine, and checks timing
 * (no upstream 429, memory bounded) that another file beside it would only blur. The fleet
 * test starts eight service processes and a second server, and times how fast a dead worker's
 * leases move on.
 */
/**
 * The image tests (`npm run test:image`) need a container engine and build the image: run
 * only when asked for by name, after `npm test` in CI.
 */
const CONTAINER_TESTS = 'test/container/';
const ALONE = new Set(['test/simulation.test.ts', 'test/fleet.test.ts']);

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
    const script = `import { run } from 'uvu/run'; await run([{ name: ${JSON.stringify(path.relative(root, file))}, file: ${JSON.stringify(file)} }], { bail: false });`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: root,
      env: { ...env, FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own: a file killed for taking too long takes its servers with it.
      detached: true,
    });
    running.add(child);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      output += `\n[test/run] ${file} exceeded ${FILE_TIMEOUT_MS} ms; killed\n`;
      killGroup(child);
    }, FILE_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      const count = (label: string) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(output)?.[1] ?? 0);
      const total = count('Total');
      const passed = count('Passed');
      const skipped = count('Skipped');
      // A file that crashed before uvu's summary counts as one failure, not as nothing.
      const failed = total - passed - skipped || (code === 0 ? 0 : 1);
      resolve({ file, passed, failed, skipped, ok: code === 0 && failed === 0, output, seconds: (Date.now() - started) / 1000 });
    });
  });
}

async function main(): Promise<number> {
  const filters = process.argv.slice(2);
  const files = (await testFiles(path.join(root, 'test'))).filter((file) =>
    filters.length === 0
      ? !path.relative(root, file).startsWith(CONTAINER_TESTS)
      : filters.some((f) => path.relative(root, file).includes(f.replace(/^\.\//, ''))),
  );
  if (files.length === 0) {
    process.stderr.write('no test files matched\n');
    return 1;
  }

  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-test-pg-'));
  const pg = await startEmbeddedPostgres({ dir, port: await freePort(), logger: createLogger({ level: 'warn' }) });
  const env = { ...process.env, TEST_PG_ADMIN_URL: pg.adminUrl, TRIBUTARY_LOG_LEVEL: process.env.TRIBUTARY_LOG_LEVEL ?? 'warn' };

  const results: FileResult[] = [];
  const alone = files.filter((f) => ALONE.has(path.relative(root, f)));
  const queue = files.filter((f) => !alone.includes(f));
  const runQueue = (list: string[], concurrency: number) =>
    Promise.all(
      Array.from({ length: Math.min(concurrency, list.length) }, async () => {
        for (let file = list.shift(); file && !interrupted; file = list.shift()) {
          const result = await runFile(file, env);
          results.push(result);
          const mark = result.ok ? 'ok  ' : 'FAIL';
          process.stdout.write(`${mark} ${path.relative(root, file)} (${result.passed} passed, ${result.failed} failed, ${result.seconds.toFixed(1)} s)\n`);
          if (!result.ok || process.env.TEST_VERBOSE) process.stdout.write(`${result.output}\n`);
        }
      }),
    );
  try {
    await runQueue(queue, CONCURRENCY);
    await runQueue(alone, 1);
  } finally {
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
  }

  const passed = results.reduce((n, r) => n + r.passed, 0);
  const failed = results.reduce((n, r) => n + r.failed, 0);
  const skipped = results.reduce((n, r) => n + r.skipped, 0);
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
    process.stderr.write(`test run failed to start: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
