import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './harness/process.ts';

const run = promisify(execFile);
const fixture = path.join(repoRoot, 'test/fixtures/heap-burst.ts');

interface Outcome {
  idle: number;
  peak: number;
  after: number;
  trims: Array<{ fromMb: number; toMb: number; pauseMs: number }>;
}

async function burst(flags: string[], args: string[] = []): Promise<Outcome> {
  const { stdout } = await run(process.execPath, [...flags, '--import', 'tsx', fixture, ...args], { cwd: repoRoot, timeout: 30_000 });
  const lines = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const result = lines.find((line) => line.result)?.result as Omit<Outcome, 'trims'>;
  assert.ok(result, `no result in ${stdout}`);
  const trims = lines.filter((line) => line.msg === 'heap trimmed after a burst') as unknown as Outcome['trims'];
  return { ...result, trims };
}

test('a quiet process gives back the heap a burst grew into, which V8 alone keeps', async () => {
  const [trimmed, plain] = await Promise.all([burst(['--expose-gc']), burst([])]);
  assert.ok(trimmed.peak > trimmed.idle + 100 * 2 ** 20, `the burst grew the heap: ${JSON.stringify(trimmed)}`);
  assert.is(trimmed.trims.length, 1, `one trim: ${JSON.stringify(trimmed.trims)}`);
  assert.ok(trimmed.after < trimmed.peak / 3, `heap after ${trimmed.after} against a peak of ${trimmed.peak}`);
  // Without --expose-gc there is no trim, and V8 keeps several times the heap.
  assert.is(plain.trims.length, 0, `without the flag: ${JSON.stringify(plain.trims)}`);
  assert.ok(plain.after > 3 * trimmed.after, `kept ${plain.after} without a trim, ${trimmed.after} with one`);
});

test('no trim while the event loop is busy', async () => {
  const busy = await burst(['--expose-gc'], ['--busy']);
  assert.ok(busy.peak > busy.idle + 100 * 2 ** 20, `the burst grew the heap: ${JSON.stringify(busy)}`);
  assert.is(busy.trims.length, 0, `busy: ${JSON.stringify(busy.trims)}`);
});

test.run();
