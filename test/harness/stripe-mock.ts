/**
 * stripe-mock, Stripe's own mock server, built with `go install` at the version the catalog
 * was generated from and cached in `$TRIBUTARY_CACHE_DIR/stripe-mock-<version>/`.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { STRIPE_MOCK_VERSION } from '../../src/stripe/catalog.ts';
import { freePort } from './ports.ts';
import { waitFor } from './process.ts';

const run = promisify(execFile);

export interface StripeMock {
  url: string;
  stop(): Promise<void>;
}

async function binary(): Promise<string> {
  const cache = process.env.TRIBUTARY_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'tributary');
  const bin = path.join(cache, `stripe-mock-${STRIPE_MOCK_VERSION}`);
  const exe = path.join(bin, 'stripe-mock');
  if (existsSync(exe)) return exe;
  mkdirSync(bin, { recursive: true });
  try {
    await run('go', ['install', `github.com/stripe/stripe-mock@${STRIPE_MOCK_VERSION}`], {
      env: { ...process.env, GOBIN: bin, GOFLAGS: '-mod=mod' },
      cwd: os.tmpdir(),
      timeout: 600_000,
    });
  } catch (error) {
    throw new Error(`could not build stripe-mock ${STRIPE_MOCK_VERSION} with go install (Go and the module proxy are needed): ${(error as Error).message}`);
  }
  return exe;
}

export async function startStripeMock(): Promise<StripeMock> {
  const exe = await binary();
  const port = await freePort();
  const child = spawn(exe, ['-http-addr', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      'stripe-mock',
      async () => {
        if (child.exitCode !== null) throw new Error(`stripe-mock exited: ${output}`);
        const res = await fetch(`${url}/v1/customers?limit=1`, { headers: { authorization: 'Bearer sk_test_123' } });
        return res.ok ? true : undefined;
      },
      // It parses Stripe's whole spec first: seconds on a quiet machine, much longer on a busy one.
      90_000,
    );
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`stripe-mock did not start: ${(error as Error).message}\n${output}`);
  }
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
