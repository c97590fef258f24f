import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Arrival as FakeArrival } from '../../fakes/shared/stats.ts';
import { repoRoot } from './process.ts';

/** A request as the fake received it (the fakes' own shape, less the limited key), and its answer's status once sent. */
export interface Arrival extends Omit<FakeArrival, 'key'> {
  status?: number;
}

export interface FakeProcess {
  url: string;
  /** The base's or the account's id. */
  id: string;
  /** Stripe, generated: the account's first customer. */
  first?: string;
  /** airtable-user: every base, with the token (of the one user) that reads it. */
  bases?: Array<{ id: string; token: string }>;
  /** Its request and 429 counts, as the fake saw them, and the requests under each path prefix asked for. */
  stats(...pathPrefixes: string[]): Promise<{ requests: number; rateLimited: number; paths: Record<string, number> }>;
  /** Every request it has received, in order. */
  arrivals(): Promise<Arrival[]>;
  /** Airtable: a second token, reading the base or only another one. */
  addToken(token: string, reads: 'base' | 'other'): Promise<void>;
  /** airtable-user: sets the first record's Name in a base, as a person in Airtable would; when (the fake's clock). */
  edit(baseId: string, text: string): Promise<{ record: string; at: number }>;
  /** airtable-user: the 429s answered (the first 20), each with the requests before it. */
  refusals(): Promise<unknown[]>;
  close(): Promise<void>;
}

/**
 * A fake Airtable (a generated base) or Stripe (an empty account) in a process of its own.
 * Rate-limit tests use it: in the test's own process, a busy event loop delays when the fake
 * reads requests by more than the limiter's margin, and the fake then counts requests closer
 * together than they were sent.
 */
export async function startFakeProcess(
  options:
    | { kind: 'airtable'; token: string; records: number; seed?: number }
    | { kind: 'airtable-user'; tokenPrefix: string; bases: number; records: number; user: string }
    | { kind: 'stripe'; key: string; customers?: number; seed?: number },
): Promise<FakeProcess> {
  const args =
    options.kind === 'airtable'
      ? ['airtable', options.token, String(options.records), String(options.seed ?? 5)]
      : options.kind === 'airtable-user'
        ? ['airtable-user', options.tokenPrefix, String(options.records), '1', String(options.bases), options.user]
        : ['stripe', options.key, String(options.customers ?? 0), String(options.seed ?? 1)];
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'test', 'harness', 'fake-child.ts'), ...args], {
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  const next = () => new Promise<string>((resolve) => waiting.push(resolve));
  const ready = JSON.parse(await next()) as { url: string; id: string; first?: string; bases?: Array<{ id: string; token: string }> };
  const ask = async (line: string) => {
    const answer = next();
    child.stdin!.write(`${line}\n`);
    return JSON.parse(await answer);
  };
  return {
    ...ready,
    async stats(...pathPrefixes: string[]) {
      const answer = next();
      child.stdin!.write(`${['stats', ...pathPrefixes].join(' ')}\n`);
      return JSON.parse(await answer);
    },
    async arrivals() {
      const answer = next();
      child.stdin!.write('arrivals\n');
      return JSON.parse(await answer);
    },
    edit: (baseId: string, text: string) => ask(`edit ${baseId} ${text}`),
    refusals: () => ask('refusals'),
    async addToken(token: string, reads: 'base' | 'other') {
      const answer = next();
      child.stdin!.write(`token ${token} ${reads}\n`);
      await answer;
    },
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.stdin!.end();
      }),
  };
}
