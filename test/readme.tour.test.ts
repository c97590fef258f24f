/**
 * The README's five-minute tour, run as written. Its shell blocks run in a copy of the
 * repository (the tracked files as they are in the work tree, the same node_modules): the
 * "terminal 1" block in the background, the others one after another in a single bash with
 * `set -euo pipefail`, so any failing command fails the test. A `# → text` line under a command
 * is what that block must print (in order; `…` stands for any word, `|` for psql's column bar).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { bindable } from './harness/ports.ts';
import { repoRoot } from './harness/process.ts';

/** The fixed ports the tour's commands name. */
const TOUR_PORTS = [8080, 8081, 8082, 9101, 9102, 54329];
const MARK = '@@tour-block-done@@';

interface Block {
  code: string;
  expected: string[];
}

/** The shell blocks of the README section "Five-minute tour", with their expectations. */
export function tourBlocks(readme: string): { background: string; blocks: Block[] } {
  const start = readme.indexOf('\n## Five-minute tour');
  if (start < 0) throw new Error('the README has no "Five-minute tour" section');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const codes = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const background = codes.find((code) => code.startsWith('# terminal 1'));
  if (!background) throw new Error('the tour has no "# terminal 1" block');
  const blocks = codes
    .filter((code) => code !== background)
    .map((code) => ({
      code,
      expected: code
        .split('\n')
        .filter((line) => line.startsWith('# → '))
        .map((line) => line.slice('# → '.length)),
    }));
  return { background, blocks };
}

/** An expectation as a pattern: `…` any word, spaces and `|` as psql aligns them. */
function pattern(expected: string): RegExp {
  const parts = expected.split('…').map((part) =>
    part
      .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
      .replace(/\s*\\\|\s*/g, '\\s*\\|\\s*')
      .replace(/ +/g, '\\s+'),
  );
  return new RegExp(parts.join('\\S*'));
}

/** A fresh terminal's environment: none of the suite's own settings leak into the tour. */
function terminalEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(TRIBUTARY_|DATABASE_URL$|KAFKA_BROKERS$|PG|npm_)/.test(key)) continue;
    env[key] = value;
  }
  return env;
}

/** The repository as a clone has it (tracked files, work-tree contents) beside the same node_modules. */
async function copyOfRepository(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-tour-'));
  await chmod(dir, 0o755); // as a clone is (mkdtemp's 0700 would keep the embedded PostgreSQL out when run as root)
  const { stdout } = await promisify(execFile)('git', ['ls-files', '-z'], { cwd: repoRoot, maxBuffer: 16 << 20 });
  for (const file of stdout.split('\0').filter(Boolean)) {
    await mkdir(path.join(dir, path.dirname(file)), { recursive: true });
    await copyFile(path.join(repoRoot, file), path.join(dir, file)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error; // deleted in the work tree, not yet committed
    });
  }
  await symlink(path.join(repoRoot, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

function collect(child: ChildProcess): { out: () => string; err: () => string; exited: Promise<number | string> } {
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { out: () => out, err: () => err, exited };
}

test('pattern: … stands for a word, | for an aligned column bar', () => {
  assert.ok(pattern('cus_… | Ada King').test(' cus_Mg6ZWrxKVbvPla | Ada King'));
  assert.ok(pattern('Launch | Todo').test(' Launch | Todo\n'));
  assert.not.ok(pattern('Launch | Todo').test(' Launch | Done'));
  assert.ok(pattern('{"ok":true,"lsn":"…"}').test('{"ok":true,"lsn":"0/29E1118"}'));
});

test('the README tour runs as written against the fakes', async () => {
  const readme = await readFile(path.join(repoRoot, 'README.md'), 'utf8');
  const { background, blocks } = tourBlocks(readme);
  assert.ok(blocks.length >= 5, `the tour has ${blocks.length} blocks`);
  assert.ok(blocks.reduce((n, b) => n + b.expected.length, 0) >= 6, 'the tour says what its commands print');
  const taken = [];
  for (const port of TOUR_PORTS) if ((await bindable(port)) === undefined) taken.push(port);
  assert.equal(taken, [], `the tour uses fixed ports; taken here: ${taken.join(', ')}`);

  const dir = await copyOfRepository();
  const env = terminalEnv();
  const first = spawn('bash', ['-c', background], { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const service = collect(first);
  try {
    const script = blocks.map((b) => `${b.code}\necho '${MARK}'\n`).join('');
    const second = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const tour = collect(second);
    const timer = setTimeout(() => second.kill('SIGKILL'), 300_000);
    const code = await tour.exited;
    clearTimeout(timer);
    const outputs = tour.out().split(`${MARK}\n`);
    const failed = () =>
      `\n--- tour stdout ---\n${tour.out().slice(-3000)}\n--- tour stderr ---\n${tour.err().slice(-3000)}\n--- terminal 1 ---\n${service.err().slice(-3000)}`;
    assert.is(code, 0, `block ${outputs.length} of the tour failed (exit ${code})${failed()}`);
    blocks.forEach((block, i) => {
      let rest = outputs[i] ?? '';
      for (const expected of block.expected) {
        const match = pattern(expected).exec(rest);
        assert.ok(match, `block ${i + 1} should print "${expected}"${failed()}`);
        rest = rest.slice(match!.index + match![0].length);
      }
    });
  } finally {
    // Ctrl-C in the first terminal, and the fakes stopped with it.
    try {
      process.kill(-first.pid!, 'SIGINT');
    } catch {}
    const timer = setTimeout(() => {
      try {
        process.kill(-first.pid!, 'SIGKILL');
      } catch {}
    }, 60_000);
    await service.exited;
    clearTimeout(timer);
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
