/**
 * One tenant's flood of a route must leave another tenant's requests fast. It once did not:
 * each `GET /api/syncs/:id/tables` opened a superuser connection and counted every table
 * (3,000 calls at concurrency 1,000 held 243 backends and took the other tenant's p50 from
 * 4 ms to 226 ms), and nothing bounded one account's long polls, waits, or share of the
 * control pool. Timing bounds here are loose (the machine is shared); each test also checks
 * the mechanism: backends opened, 429s past the caps, connections one account holds.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withDatabase } from '../src/db/sql.ts';
import { pause } from '../src/time.ts';
import { DEFAULT_TENANT_LIMITS } from '../src/tenancy/limits.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { airtableSyncBody, createAccount, loudSetUp, request, startTestService, TEST_BASES, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let events: string;
let alice: TestAccount;
let bob: TestAccount;
/** Alice's syncs (the flooding tenant) and Bob's (the other tenant), with their databases as the superuser. */
let aliceSync: { id: string; db: string; dbUrl: string };
let aliceSecond: { id: string; db: string; dbUrl: string };
let bobSync: string;

async function createSync(account: TestAccount, base: string, rows: number) {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: airtableSyncBody(base) });
  assert.is(created.status, 201, created.text);
  const db: string = created.body.database.name;
  const dbUrl = withDatabase(serverAdminUrl(), db);
  // No sync runner here (waits stay open until their timeout); the table the console counts is made by hand.
  await query(dbUrl, 'CREATE TABLE public.items (id int PRIMARY KEY, name text)');
  await query(dbUrl, "INSERT INTO public.items SELECT i, 'item ' || i FROM generate_series(1, $1) i", [rows]);
  return { id: created.body.id as string, db, dbUrl };
}

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService();
      events = `http://127.0.0.1:${svc.service.eventsPort}`;
      alice = await createAccount(svc, 'alice');
      bob = await createAccount(svc, 'bob');
      aliceSync = await createSync(alice, TEST_BASES[0]!, 1000);
      aliceSecond = await createSync(alice, TEST_BASES[1]!, 10);
      bobSync = (await createSync(bob, TEST_BASES[2]!, 5)).id;
    },
    () => svc,
  ),
);
test.after(async () => svc?.stop());

/** Runs `calls` requests, `concurrency` at a time. */
async function flood<T>(calls: number, concurrency: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls) results.push(await call(next++));
    }),
  );
  return results;
}

/** Bob's `GET /api/syncs/:id`, one after another until `done` says stop: the latencies in ms. */
async function bobMeanwhile(done: () => boolean): Promise<number[]> {
  const took: number[] = [];
  while (!done()) {
    const started = performance.now();
    const answer = await request(svc.api, 'GET', `/api/syncs/${bobSync}`, { token: bob.token });
    took.push(performance.now() - started);
    assert.is(answer.status, 200, answer.text);
    await pause(20);
  }
  return took;
}

/**
 * Samples the server's backends every 20 ms until stopped: the pids seen on `database`, and
 * the most at once on `ours` (this file's service's databases: the server is shared with the
 * other files running meanwhile, whose backends come and go with their own work).
 */
function watchBackends(database: string, ours: string[]) {
  const admin = new pg.Client({ connectionString: serverAdminUrl() });
  const pids = new Set<number>();
  let mostOnServer = 0;
  let stopped = false;
  const running = (async () => {
    await admin.connect();
    while (!stopped) {
      const { rows } = await admin.query<{ pid: number; datname: string | null }>(
        "SELECT pid, datname FROM pg_stat_activity WHERE backend_type = 'client backend'",
      );
      mostOnServer = Math.max(mostOnServer, rows.filter((row) => row.datname !== null && ours.includes(row.datname)).length);
      for (const row of rows) if (row.datname === database) pids.add(row.pid);
      await pause(20);
    }
    await admin.end();
  })();
  return {
    async stop() {
      stopped = true;
      await running;
      return { pids: pids.size, mostOnServer };
    },
  };
}

const basic = (account: TestAccount) => `Basic ${Buffer.from(`${account.eventsUsername}:${account.eventsPassword}`).toString('base64')}`;

test('200 /tables calls at concurrency 100: one pooled connection, one shared count, the other tenant unaffected', async () => {
  // This file's databases: its service's control database and its syncs'.
  const syncDatabases = await query<{ name: string }>(svc.controlUrl, 'SELECT database_name AS name FROM syncs');
  const ours = [new URL(svc.controlUrl).pathname.slice(1), ...syncDatabases.map((row) => row.name)];
  const [{ n: before }] = (await query<{ n: number }>(
    serverAdminUrl(),
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = ANY($1)",
    [ours],
  )) as [{ n: number }];
  const backends = watchBackends(aliceSync.db, ours);
  let flooding = true;
  const bobs = bobMeanwhile(() => !flooding);
  const answers = await flood(200, 100, () => request(svc.api, 'GET', `/api/syncs/${aliceSync.id}/tables`, { token: alice.token }));
  flooding = false;
  const took = await bobs;
  const seen = await backends.stop();

  const ok = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 429);
  assert.is(ok.length + refused.length, 200, `statuses ${[...new Set(answers.map((a) => a.status))].join(', ')}`);
  assert.ok(ok.length > 0, 'some calls were answered');
  for (const answer of ok)
    assert.equal(
      answer.body.data.map((t: { name: string; rows: number; rows_estimated: boolean }) => [t.name, t.rows, t.rows_estimated]),
      [['items', 1000, false]],
    );
  for (const answer of refused) {
    assert.is(answer.body.error.code, 'too_many_requests');
    assert.match(answer.body.error.message, /at most 20 reads/);
    assert.is(answer.headers.get('retry-after'), '1');
  }
  // Once a backend per call (100 at once); now the console's one connection to the database.
  assert.ok(seen.pids <= 2, `${seen.pids} backends opened on the sync's database`);
  assert.ok(seen.mostOnServer <= before + 12, `${seen.mostOnServer} backends on this file's databases at once (${before} before)`);
  assert.ok(took.length > 0);
  assert.ok(Math.max(...took) < 2_000, `the other tenant's GET took up to ${Math.max(...took).toFixed(0)} ms`);
});

test("past 20 of an account's reads at once, 429; past 8 worked on, its next requests wait their turn; another account's are not held up", async () => {
  // The count of the table waits for this lock: the reads stay open meanwhile.
  const locker = new pg.Client({ connectionString: aliceSecond.dbUrl });
  await locker.connect();
  await locker.query('BEGIN; LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE');
  const answers: Array<{ status: number; body: any }> = [];
  let aliceGet: number | undefined;
  let queued: Promise<unknown> = Promise.resolve();
  const calls = Array.from({ length: 25 }, () =>
    request(svc.api, 'GET', `/api/syncs/${aliceSecond.id}/tables`, { token: alice.token }).then((a) => answers.push(a)),
  );
  try {
    await waitFor('five refusals', async () => (answers.length >= 5 ? true : undefined), 5_000);
    assert.equal(
      answers.map((a) => a.status),
      [429, 429, 429, 429, 429],
    );
    assert.match(answers[0]!.body.error.message, /at most 20 reads of the syncs list and of the console/);
    // Alice's list is a read too: refused while her twenty wait.
    assert.is((await request(svc.api, 'GET', '/api/syncs', { token: alice.token })).status, 429);
    // Eight of them are worked on (waiting for the count): her next request waits its turn.
    queued = request(svc.api, 'GET', `/api/syncs/${aliceSync.id}`, { token: alice.token }).then((a) => (aliceGet = a.status));
    await pause(1_000);
    assert.is(aliceGet, undefined, "Alice's request waits for one of her places");
    const started = performance.now();
    const bobs = await request(svc.api, 'GET', `/api/syncs/${bobSync}/tables`, { token: bob.token });
    assert.is(bobs.status, 200, bobs.text);
    assert.ok(performance.now() - started < 2_000, `Bob's tables took ${(performance.now() - started).toFixed(0)} ms`);
  } finally {
    await locker.query('ROLLBACK');
    await locker.end();
  }
  await Promise.all([...calls, queued]);
  assert.is(aliceGet, 200);
  assert.is(answers.filter((a) => a.status === 200).length, 20);
  assert.ok(answers.filter((a) => a.status === 200).every((a) => a.body.data[0].rows === 10));
});

test("an account's requests hold at most 3 control connections: its long polls stuck on a group lock leave the pool to others", async () => {
  // The consumer group's lock (GroupStore.locked) taken from outside: each of Alice's consumes
  // waits for it inside a transaction, holding a control connection.
  const control = new pg.Client({ connectionString: svc.controlUrl });
  await control.connect();
  await control.query('SELECT pg_advisory_lock($1, hashtext($2))', [0x6367, `${alice.id}/stuck`]);
  let answered: number[] = [];
  const polls = Array.from({ length: 20 }, (_, i) =>
    fetch(`${events}/consume/stuck/i${i}/svc.${aliceSync.id}.items?timeout=3000`, { headers: { authorization: basic(alice) } }).then((r) => r.status),
  );
  try {
    // Only the waits for this lock: the server is the run's, where other files' provisioning
    // waits on advisory locks of its own (a count of all of them once read 7 here).
    const waiters = async () =>
      (
        await control.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2 AND classid = $1::oid
              AND objid = (hashtext($2)::bigint & 4294967295)::oid
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          [0x6367, `${alice.id}/stuck`],
        )
      ).rows[0]!.n;
    await waitFor("the first of Alice's polls waiting on the lock", async () => ((await waiters()) > 0 ? true : undefined), 10_000);
    await pause(500); // for the others to come, were they let through
    const waiting = await waiters();
    assert.ok(waiting <= 3, `${waiting} of Alice's transactions wait on the lock, each holding a control connection`);
    const started = performance.now();
    const bobs = await request(svc.api, 'GET', `/api/syncs/${bobSync}`, { token: bob.token });
    assert.is(bobs.status, 200, bobs.text);
    assert.ok(performance.now() - started < 2_000, `Bob's GET took ${(performance.now() - started).toFixed(0)} ms`);
    const list = await request(svc.api, 'GET', '/api/syncs', { token: bob.token });
    assert.is(list.status, 200, list.text);
  } finally {
    await pause(2_000); // past Bob's bound: without the fair share, his GET would still be waiting
    await control.query('SELECT pg_advisory_unlock($1, hashtext($2))', [0x6367, `${alice.id}/stuck`]);
    await control.end();
    // Ended before the next test, pass or fail: they count against Alice's long polls.
    answered = await Promise.all(polls);
  }
  assert.equal([...new Set(answered)], [200]);
});

test('120 long polls of one account: 50 wait, 70 are refused with 429; another account polls and reads as usual', async () => {
  const topic = `svc.${aliceSync.id}.items`;
  const statuses: number[] = [];
  const bodies: unknown[] = [];
  const polls = Array.from({ length: 120 }, async (_, i) => {
    const response = await fetch(`${events}/consume/many/i${i % 10}/${topic}?timeout=4000`, { headers: { authorization: basic(alice) } });
    statuses.push(response.status);
    if (response.status === 429) bodies.push(await response.json());
    else await response.text();
  });
  await waitFor('the refusals', async () => (statuses.length >= 70 ? true : undefined), 10_000);
  const started = performance.now();
  const bobsPoll = await fetch(`${events}/consume/mine/one/svc.${bobSync}.items?timeout=100`, { headers: { authorization: basic(bob) } });
  assert.is(bobsPoll.status, 200, await bobsPoll.text());
  const bobs = await request(svc.api, 'GET', `/api/syncs/${bobSync}`, { token: bob.token });
  assert.is(bobs.status, 200);
  assert.ok(performance.now() - started < 2_000, `Bob's poll and GET took ${(performance.now() - started).toFixed(0)} ms`);
  await Promise.all(polls);
  assert.is(statuses.filter((s) => s === 429).length, 70);
  assert.is(statuses.filter((s) => s === 200).length, 50);
  assert.equal(bodies[0], {
    error: 'at most 50 long polls (/consume and /fetch) of one account may be open at once; retry when one of them has answered',
    status: 429,
  });
  // Places are given back: a poll now is answered.
  assert.is((await fetch(`${events}/consume/many/i0/${topic}?timeout=10`, { headers: { authorization: basic(alice) } })).status, 200);
});

test('past 100 open waits of one account, 429; another account still waits', async () => {
  const statuses: number[] = [];
  const waits = Array.from({ length: 110 }, async () => {
    const answer = await request(svc.api, 'GET', `/api/wait/${aliceSync.id}?timeout=3000`, { token: alice.token });
    statuses.push(answer.status);
    if (answer.status === 429) assert.match(answer.body.error.message, /at most 100 waits of one account/);
    else assert.equal([answer.body.ok, answer.body.reason, answer.body.waited_for], [false, 'timeout', 'pass']);
  });
  await waitFor('the refusals', async () => (statuses.length >= 10 ? true : undefined), 10_000);
  const bobs = await request(svc.api, 'GET', `/api/wait/${bobSync}?timeout=50`, { token: bob.token });
  assert.equal([bobs.status, bobs.body.ok, bobs.body.reason], [200, false, 'timeout']);
  await Promise.all(waits);
  assert.is(statuses.filter((s) => s === 429).length, 10);
  assert.is(statuses.filter((s) => s === 200).length, 100);
});

/**
 * Sends `probe` until the service refuses one. A flood's own requests may still be on their
 * way (on a busy machine 300 ms was not enough for 50): a probe admitted meanwhile takes one of
 * the places, so once one is refused, the account's places are all taken.
 */
async function untilRefused(probe: () => Promise<Response>): Promise<{ response: Response; ms: number }> {
  const admitted: Promise<string>[] = [];
  for (let tries = 0; tries < 200; tries++) {
    const started = performance.now();
    const response = await Promise.race([probe(), pause(1500).then(() => undefined)]);
    if (response?.status === 429) {
      await Promise.all(admitted);
      return { response, ms: performance.now() - started };
    }
    // Admitted (it is held open, or answered): it counts as one of the flood's.
    if (response) admitted.push(response.text());
  }
  throw new Error('no probe was refused');
}

test('a client that sends its refused request again at once is answered a second later: 10 in flight, 2 s, a few dozen refusals, not thousands', async () => {
  const topic = `svc.${aliceSync.id}.items`;
  const poll = (instance: string) => fetch(`${events}/consume/held/${instance}/${topic}?timeout=4000`, { headers: { authorization: basic(alice) } });
  // Alice's 50 long polls are open: every further one is refused.
  const open = Array.from({ length: 50 }, (_, i) => poll(`i${i % 10}`));
  await (await untilRefused(() => poll('probe'))).response.text();
  let refusals = 0;
  const until = performance.now() + 2_000;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (performance.now() < until) {
        const response = await poll('x');
        await response.text();
        assert.is(response.status, 429);
        assert.is(response.headers.get('retry-after'), '1');
        refusals++;
      }
    }),
  );
  assert.ok(refusals >= 10 && refusals <= 40, `${refusals} refusals in 2 s from 10 clients`);
  // The same on the management API: Alice's waits past her 100.
  const wait = () => fetch(`${svc.api}/api/wait/${aliceSync.id}?timeout=3000`, { headers: { authorization: `Bearer ${alice.token}` } });
  const waits = Array.from({ length: 100 }, () => wait().then((r) => r.text()));
  const refused = await untilRefused(wait);
  assert.is(refused.response.status, 429);
  assert.ok(refused.ms >= 900, `held ${refused.ms.toFixed(0)} ms before the 429 went out`);
  await Promise.all([...open.map((p) => p.then((r) => r.text())), ...waits]);
});

test("an account's token is looked up once, then kept 5 s: its flood is not a query a request", async () => {
  const path = `/api/syncs/${bobSync}`;
  assert.is((await request(svc.api, 'GET', path, { token: bob.token })).status, 200);
  // The token's row changes behind the service's back: the token is still known from memory...
  const [row] = await query<{ digest: string }>(svc.controlUrl, 'SELECT api_token_sha256 AS digest FROM accounts WHERE id = $1', [bob.id]);
  await query(svc.controlUrl, "UPDATE accounts SET api_token_sha256 = 'moved' WHERE id = $1", [bob.id]);
  try {
    for (let i = 0; i < 50; i++) assert.is((await request(svc.api, 'GET', path, { token: bob.token })).status, 200, `request ${i + 1} from memory`);
    // ... and no longer once the 5 s have passed.
    await pause(5_200);
    assert.is((await request(svc.api, 'GET', path, { token: bob.token })).status, 401);
  } finally {
    await query(svc.controlUrl, 'UPDATE accounts SET api_token_sha256 = $2 WHERE id = $1', [bob.id, row!.digest]);
  }
});

test('past its requests a second (a burst of twice as many), one account gets 429 with Retry-After; another is served at once', async () => {
  // 200 a second is the default; a client that cannot send faster than that (a busy machine
  // once managed 137 a second) is never refused. So a service of its own allows 20 here.
  assert.is(DEFAULT_TENANT_LIMITS.requestsPerSecond, 200, 'the default');
  const limited = await startTestService({ config: { tenantLimits: { ...DEFAULT_TENANT_LIMITS, requestsPerSecond: 20 } } });
  try {
    const [carol, dave] = [await createAccount(limited, 'carol'), await createAccount(limited, 'dave')];
    const started = performance.now();
    // 15 at once: the syncs list is also one of the reads an account may have 20 of at once.
    const answers = await flood(300, 15, () => request(limited.api, 'GET', '/api/syncs', { token: carol.token }));
    const seconds = (performance.now() - started) / 1000;
    const served = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    // However slow the machine, what was served fits the bucket: the burst plus 20 a second.
    assert.ok(served <= 40 + 20 * seconds + 2, `${served} served in ${seconds.toFixed(1)} s`);
    assert.ok(refused.length > 0, `none of 300 refused in ${seconds.toFixed(1)} s`);
    assert.is(served + refused.length, 300);
    const messages = [...new Set(refused.map((a) => a.body?.error?.message ?? a.text))];
    assert.equal(
      messages.filter((m) => !/more than 20 requests a second from one account/.test(m)),
      [],
      `every refusal names the rate: ${messages.join(' | ')}`,
    );
    assert.ok(refused[0]!.headers.get('retry-after'), 'Retry-After');
    const daveStarted = performance.now();
    assert.is((await request(limited.api, 'GET', '/api/syncs', { token: dave.token })).status, 200);
    assert.ok(performance.now() - daveStarted < 1_000, `Dave waited ${(performance.now() - daveStarted).toFixed(0)} ms`);
  } finally {
    await limited.stop();
  }
});

test.run();
