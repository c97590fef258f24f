/**
 * `npm run simulate -- --seeds N …`: the simulation over N seeds, one child process each
 * (`sim/main.ts --seed S` with the same options), one after another. Each seed's output goes to
 * `sim-runs/seed-S.log`; a seed that fails keeps it, with the service's logs of every process
 * (`sim-runs/seed-S/`), and one that passes leaves nothing. Prints a line a seed and the
 * seeds that failed, each with the command that replays it.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

export interface SeedRun {
  seed: number;
  ok: boolean;
  seconds: number;
  /** The summary's closing lines: violations, or the error that ended the run. */
  why: string;
  /** Seconds from the last fault undone to every sync caught up, as the summary said. */
  caughtUpS?: number;
}

/** Runs each seed in turn with `args` (the simulation's options, without --seed/--seeds). */
export async function runSeeds(seeds: number[], args: string[], out: string, log: (line: string) => void): Promise<SeedRun[]> {
  await mkdir(out, { recursive: true });
  const runs: SeedRun[] = [];
  for (const seed of seeds) {
    const started = Date.now();
    const file = path.join(out, `seed-${seed}.log`);
    const { code, kept, tail, caughtUpS } = await runOne(seed, args, file);
    const ok = code === 0;
    if (ok) await rm(file, { force: true });
    else if (kept) {
      // An earlier run's logs of the same seed make way: a rename onto them fails.
      await rm(path.join(out, `seed-${seed}`), { recursive: true, force: true });
      await rename(path.join(kept, 'service', 'logs'), path.join(out, `seed-${seed}`)).catch(() => undefined);
    }
    if (kept) await rm(kept, { recursive: true, force: true }).catch(() => undefined);
    const run = { seed, ok, seconds: Math.round((Date.now() - started) / 1000), why: ok ? '' : tail, caughtUpS };
    runs.push(run);
    const caughtUp = caughtUpS === undefined ? '' : `; caught up ${caughtUpS} s after the last fault`;
    log(`seed ${seed}: ${ok ? 'passed' : `FAILED (exit ${code}; ${file})`} in ${run.seconds} s${caughtUp}`);
  }
  return runs;
}

function runOne(seed: number, args: string[], file: string): Promise<{ code: number; kept: string | undefined; tail: string; caughtUpS?: number }> {
  return new Promise((resolve, reject) => {
    const output = createWriteStream(file);
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args, '--seed', String(seed)], {
      env: { ...process.env, SIM_KEEP: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let kept: string | undefined;
    let caughtUpS: number | undefined;
    let recent = '';
    const take = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output.write(text);
      kept = /kept (\S+)/.exec(text)?.[1] ?? kept;
      const caught = /caught up (\d+) s after the last fault/.exec(text)?.[1];
      if (caught) caughtUpS = Number(caught);
      recent = (recent + text).slice(-2000);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', reject);
    child.on('close', (code) => {
      output.end(() => resolve({ code: code ?? 1, kept, caughtUpS, tail: recent.trim().split('\n').slice(-8).join('\n') }));
    });
  });
}
