/**
 * The quota over a slow, jittery path. The upstream counts a request when it arrives; with a
 * latency of 600 ms plus up to 400 ms of jitter on each chunk, requests granted a fifth of a
 * second apart arrive bunched, and when the path turns fast again, the requests still out
 * arrive beside the new ones. Seen in the simulation as Airtable 429s (a 30 s lockout) in the
 * second an `upstream-slow` fault ended. Airtable's client takes every slot of a base's 5 a
 * second here, from a dozen requests at once, through a relay in a thread of its own (as the
 * simulation's), to the fake Airtable in a process of its own; the fake must refuse nothing.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RelayThread, type ThreadRelay } from '../sim/relay-thread.ts';
import { AirtableClient, AirtableError } from '../src/airtable/client.ts';
import { Secret } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { QuotaLimiter } from '../src/quota/limiter.ts';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { note } from './harness/note.ts';
import { freshDatabase } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN } from './harness/service.ts';
import { fileLogger } from './harness/test-log.ts';

let fake: FakeProcess;
let pool: pg.Pool;
let thread: RelayThread;
let relay: ThreadRelay;

test.before(async () => {
  const url = await freshDatabase('quota_slow_path');
  await migrateControlDatabase(url, fileLogger());
  pool = new pg.Pool({ connectionString: url });
  fake = await startFakeProcess({ kind: 'airtable', token: AIRTABLE_TEST_TOKEN, records: 50 });
  thread = RelayThread.start();
  relay = await thread.relayTo(fake.url);
});

test.after(async () => {
  await thread?.close();
  await fake?.close();
  await pool?.end();
});

test('a path that is slow and jittery, then fast again: the base is never refused', async () => {
  const client = new AirtableClient({
    baseUrl: relay.through(fake.url).replace(/\/$/, ''),
    token: new Secret(AIRTABLE_TEST_TOKEN),
    baseId: fake.id,
    limiter: new QuotaLimiter({ pool }),
    quota: { kind: 'client' },
    attempts: 1,
  });
  const started = Date.now();
  let stop = false;
  const done = { slow: 0, fast: 0 };
  let refused = 0;
  let fast = false;
  const worker = async () => {
    while (!stop) {
      try {
        await client.schema();
        done[fast ? 'fast' : 'slow']++;
      } catch (error) {
        if (error instanceof AirtableError && error.kind === 'rate_limited') refused++;
        else throw error;
      }
    }
  };
  await relay.slow(600, 400);
  const workers = Array.from({ length: 12 }, worker);
  await new Promise((r) => setTimeout(r, 6000));
  // The path turns fast with requests still out on it: they arrive beside the next ones.
  await relay.fast();
  fast = true;
  await new Promise((r) => setTimeout(r, 3000));
  stop = true;
  await Promise.all(workers);
  const seen = await fake.stats();
  const elapsed = (Date.now() - started) / 1000;
  note(`slow path: ${done.slow} requests in 6 s; fast again: ${done.fast} in 3 s (${elapsed.toFixed(1)} s in all)`);
  assert.is(refused, 0, `the client saw ${refused} 429s`);
  assert.is(seen.rateLimited, 0, `the fake refused ${seen.rateLimited} of ${seen.requests} requests`);
  // The quota was used, not starved: the slow path still carried requests, and the fast one nearly the whole limit.
  assert.ok(done.slow >= 6, `${done.slow} requests over the slow path`);
  assert.ok(done.fast >= 9, `${done.fast} requests in the 3 s after it turned fast`);
});

test.run();
