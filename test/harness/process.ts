import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { teeToTestLog } from './test-log.ts';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface Spawned {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
}

export interface SpawnOptions {
  /** Node flags before the entry point (the service's own, SERVICE_NODE_FLAGS, for a long run). */
  nodeFlags?: readonly string[];
  /** Each line of stdout and stderr as it comes; with it, `output()` keeps nothing (a long run's log would fill memory). */
  onLine?(line: string): void;
  /** How its lines are marked in the file's service log, or false to keep them out (a log kept in a file of its own). */
  testLog?: string | false;
}

/** Runs `node bin/tributary.js …`, the same entry point as `npm start` and `npx tributary`. */
export function spawnTributary(args: string[], env: NodeJS.ProcessEnv, input?: string, options: SpawnOptions = {}): Spawned {
  const child = spawn(process.execPath, [...(options.nodeFlags ?? []), path.join(repoRoot, 'bin', 'tributary.js'), ...args], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  const onLine = options.onLine;
  // Every line also goes to the file's service log, which the runner shows around a failure.
  const source = options.testLog ?? `${args[0] ?? 'tributary'} ${child.pid}`;
  for (const stream of [child.stdout!, child.stderr!])
    createInterface({ input: stream }).on('line', (line) => {
      if (source !== false) teeToTestLog(line, source);
      onLine?.(line);
    });
  if (!onLine) {
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  }
  if (input !== undefined) child.stdin!.end(input);
  else child.stdin!.end();
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, output: () => output, exited };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Every file under `dir` (relative to the repository) whose name `match`es, with its text, in path order. */
export async function sourceFiles(dir: string, match = /\.ts$/): Promise<Array<{ file: string; text: string }>> {
  const entries = await readdir(path.join(repoRoot, dir), { recursive: true, withFileTypes: true });
  const files = entries
    .filter((entry) => entry.isFile() && match.test(entry.name))
    .map((entry) => path.relative(repoRoot, path.join(entry.parentPath, entry.name)))
    .sort();
  return Promise.all(files.map(async (file) => ({ file, text: await readFile(path.join(repoRoot, file), 'utf8') })));
}
