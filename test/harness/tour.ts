/**
 * The README's five-minute tour, as shell blocks run as written: by the README test against
 * `npm start`, and by the image test against the service in a container. A `# → text` line
 * under a command is what that block must print (in order; `…` stands for any word, `|` for
 * psql's column bar).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readFile, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as assert from 'uvu/assert';
import { repoRoot } from './process.ts';

/** The fixed ports the tour's commands name. */
export const TOUR_PORTS = [8080, 8081, 8082, 9101, 9102, 54329];
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

export async function readmeTour(): Promise<{ background: string; blocks: Block[] }> {
  return tourBlocks(await readFile(path.join(repoRoot, 'README.md'), 'utf8'));
}

/** An expectation as a pattern: `…` any word, spaces and `|` as psql aligns them. */
export function pattern(expected: string): RegExp {
  const parts = expected.split('…').map((part) =>
    part
      .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
      .replace(/\s*\\\|\s*/g, '\\s*\\|\\s*')
      .replace(/ +/g, '\\s+'),
  );
  return new RegExp(parts.join('\\S*'));
}

/** A fresh terminal's environment: none of the suite's own settings leak into the tour. */
export function terminalEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(TRIBUTARY_|DATABASE_URL$|KAFKA_BROKERS$|PG|npm_)/.test(key)) continue;
    env[key] = value;
  }
  return env;
}

/** The repository as a clone has it (tracked files, work-tree contents) beside the same node_modules. */
export async function copyOfRepository(): Promise<string> {
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

export interface Collected {
  out: () => string;
  err: () => string;
  exited: Promise<number | string>;
}

export function collect(child: ChildProcess): Collected {
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { out: () => out, err: () => err, exited };
}

/**
 * Runs the tour's blocks after "terminal 1" in one `bash -euo pipefail` in `dir`, and asserts
 * that it exits 0 and that each block prints what it says. `serviceLog` is added to a failure.
 */
export async function runTourBlocks(blocks: Block[], dir: string, env: NodeJS.ProcessEnv, serviceLog: () => string): Promise<void> {
  const script = blocks.map((b) => `${b.code}\necho '${MARK}'\n`).join('');
  const second = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const tour = collect(second);
  const timer = setTimeout(() => second.kill('SIGKILL'), 300_000);
  const code = await tour.exited;
  clearTimeout(timer);
  const outputs = tour.out().split(`${MARK}\n`);
  const failed = () =>
    `\n--- tour stdout ---\n${tour.out().slice(-3000)}\n--- tour stderr ---\n${tour.err().slice(-3000)}\n--- the service ---\n${serviceLog().slice(-3000)}`;
  assert.is(code, 0, `block ${outputs.length} of the tour failed (exit ${code})${failed()}`);
  blocks.forEach((block, i) => {
    let rest = outputs[i] ?? '';
    for (const expected of block.expected) {
      const match = pattern(expected).exec(rest);
      assert.ok(match, `block ${i + 1} should print "${expected}"${failed()}`);
      rest = rest.slice(match!.index + match![0].length);
    }
  });
}
