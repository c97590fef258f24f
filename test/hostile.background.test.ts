/**
 * One tenant's background work must not hold the control database for everyone. It once did:
 * a tenant with ~30 backfills, ten webhooks to a dead address and a recovery of each took
 * another tenant's plain `GET /api/syncs/:id` from 5–7 ms to 1.3–10.9 s. Webhook delivery,
 * backfills and the Kafka relay ran outside any tenant's scope, so the fair control pool did
 * not bound them, and the delivery log took a row per queued event. Now they run as their
 * sync's account and take its share (3 connections by default), like its requests; and a
 * failing webhook costs a row per lane (events.webhooks has that test).
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { pause } from '../src/time.ts';
import { DEFAULT_DELIVERY_BOUNDS } from '../src/events/webhooks/shared-bounds.ts';
import { DEFAULT_TENANT_LIMITS } from '../src/tenancy/limits.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { TestReceiver } from './harness/receiver.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, TEST_BASES, type TestAccount, type TestService } from './harness/service.ts';

const WEBHOOKS = 10;
const READS = 120;
const HOST_PER_SECOND = 100;
/** Attempts of an account in flight at once: fewer than a sync's 128 connections to one host. */
const IN_FLIGHT = 64;
let svc: TestService;
let receiver: TestReceiver;
let bob: TestAccount;
let alice: TestAccount;
let bobSync: string;
let aliceSync: string;

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        // A host's bound low enough that Bob's backlog to the receiver's host lasts seconds.
        config: {
          roles: ['api', 'sync', 'decoder', 'events'],
          webhookAllowPrivate: true,
          webhookBounds: { ...DEFAULT_DELIVERY_BOUNDS, perHost: HOST_PER_SECOND, inFlightPerAccount: IN_FLIGHT },
        },
        tunables: {
          airtable: { pollIntervalMs: 250, cycleGapMs: 250 },
          workerTickMs: 250,
          backfills: { chunkRows: 40, lookGapMs: 50 },
          webhooks: { schedule: { initialDelayMs: 50, maxDelayMs: 500 } },
        },
      });
      receiver = await TestReceiver.start();
      bob = await createAccount(svc, 'bob');
      alice = await createAccount(svc, 'alice');
      svc.airtable.base(TEST_BASES[0]!).generate({ seed: 3, tables: [{ name: 'Tasks', records: READS }] });
      svc.airtable.base(TEST_BASES[1]!).generate({ seed: 4, tables: [{ name: 'Notes', records: 5 }] });
      bobSync = (await createAirtableSync(svc, bob, TEST_BASES[0]!)).id;
      aliceSync = (await createAirtableSync(svc, alice, TEST_BASES[1]!)).id;
      for (let i = 0; i < WEBHOOKS; i++) {
        const made = await request(svc.api, 'POST', `/api/syncs/${bobSync}/webhooks`, {
          token: bob.token,
          body: { url: `${receiver.origin}/bob/${i}`, topics: [`svc.${bobSync}.tasks`] },
        });
        assert.is(made.status, 201, made.text);
      }
    },
    () => svc,
  ),
);
test.after(async () => {
  await receiver?.close();
  await svc?.stop();
});

test("a tenant's deliveries stuck in the control database hold its share of connections, not the pool; another tenant is served", async () => {
  // Bob's receivers fail, so each lane of his webhooks falls behind and writes where it got to;
  // from outside, that table is locked. Each such write then waits, holding a control
  // connection. Without the bound, his ten webhooks' writes held all ten, and nobody's request
  // got one.
  for (let i = 0; i < WEBHOOKS; i++) receiver.answers.set(`/bob/${i}`, 503);
  const control = new pg.Client({ connectionString: svc.controlUrl });
  await control.connect();
  await control.query('BEGIN');
  await control.query('LOCK TABLE webhook_lanes IN EXCLUSIVE MODE');
  // Looked at from another session: inside a transaction, pg_stat_activity is read once and kept.
  const waiting = async () =>
    (
      await query<{ n: number }>(
        svc.controlUrl,
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'active' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
            AND query LIKE '%INSERT INTO webhook_deliveries%'`, // the statement that also writes webhook_lanes (its text is cut before that)
      )
    )[0]!.n;
  try {
    const backfill = await request(svc.api, 'POST', `/api/syncs/${bobSync}/backfills`, { token: bob.token, body: {} });
    assert.is(backfill.status, 202, backfill.text);
    await waitFor("Bob's deliveries waiting on the lock", async () => ((await waiting()) > 0 ? true : undefined), 30_000);
    await pause(1_000); // for the others to come, were they let through
    const held = await waiting();
    assert.ok(held <= DEFAULT_TENANT_LIMITS.controlConnections, `${held} of Bob's background statements wait on the lock, each holding a connection`);
    for (const path of [`/api/syncs/${aliceSync}`, `/api/syncs/${aliceSync}/webhooks`, '/api/syncs']) {
      const started = performance.now();
      const answer = await request(svc.api, 'GET', path, { token: alice.token });
      assert.is(answer.status, 200, answer.text);
      assert.ok(performance.now() - started < 2_000, `Alice's GET ${path} took ${(performance.now() - started).toFixed(0)} ms`);
    }
    const made = await request(svc.api, 'POST', `/api/syncs/${aliceSync}/webhooks`, {
      token: alice.token,
      body: { url: `${receiver.origin}/alice`, topics: [`svc.${aliceSync}.notes`] },
    });
    assert.is(made.status, 201, made.text);
  } finally {
    await pause(2_000); // past Alice's bound: without the fair share, her requests would still be waiting
    await control.query('ROLLBACK');
    await control.end();
    receiver.answers.clear();
  }
  // Nothing of Bob's was lost for the wait: every webhook gets every read once its receiver is back.
  await waitFor(
    "every read at each of Bob's webhooks",
    async () => {
      for (let i = 0; i < WEBHOOKS; i++) {
        const reads = receiver.on(`/bob/${i}`).filter((r) => (JSON.parse(r.body) as { event: string }).event === 'read');
        if (new Set(reads.map((r) => r.id)).size < READS) return undefined;
      }
      return true;
    },
    90_000,
  );
});

/** Bob's reads at every webhook, by distinct delivery. */
const bobsReads = () => {
  let n = 0;
  for (let i = 0; i < WEBHOOKS; i++) n += new Set(receiver.on(`/bob/${i}`).map((r) => r.id)).size;
  return n;
};

test("another tenant's backlog to the same receiver host does not hold up a tenant's own deliveries", async () => {
  // Tenants share receiver hosts (hooks.zapier.com). Once, one host's rate was a token bucket
  // taken ahead in arrival order, so Alice's attempt waited behind every lane of Bob's ten
  // webhooks (1,280 at 1,000 a second: 1.3 s; here 12.8 s); and the host's connections were
  // one pool, so behind Bob's slow answers her POST queued until it timed out.
  const made = await request(svc.api, 'POST', `/api/syncs/${aliceSync}/webhooks`, {
    token: alice.token,
    body: { url: `${receiver.origin}/alice/2`, topics: [`svc.${aliceSync}.notes`] },
  });
  assert.is(made.status, 201, made.text);
  const base = svc.airtable.base(TEST_BASES[1]!);
  // The time from the event (its created_at, when the decoder read the commit) to its arrival.
  const alicesChange = async (label: string) => {
    const before = receiver.on('/alice/2').length;
    base.createRecords('Notes', [{}]);
    const post = await waitFor(
      `Alice's change ${label}`,
      async () =>
        receiver
          .on('/alice/2')
          .slice(before)
          .find((r) => (JSON.parse(r.body) as { event: string }).event === 'inserted'),
      60_000,
    );
    return post.at - Date.parse((JSON.parse(post.body) as { created_at: string }).created_at);
  };
  await alicesChange('before'); // her webhook delivers
  // Bob's backlog at full speed: his receivers answer at once, the host's rate is the limit.
  const from = bobsReads();
  const backfill = await request(svc.api, 'POST', `/api/syncs/${bobSync}/backfills`, { token: bob.token, body: {} });
  assert.is(backfill.status, 202, backfill.text);
  await waitFor("Bob's backlog going out", async () => (bobsReads() - from >= 2 * HOST_PER_SECOND ? true : undefined), 60_000);
  for (let i = 0; i < 3; i++) {
    const took = await alicesChange(`${i} beside Bob's backlog`);
    assert.ok(bobsReads() - from < WEBHOOKS * READS, "Bob's backlog is still going out");
    assert.ok(took < 2_000, `Alice's change reached her webhook ${took} ms after its event, behind Bob's backlog to the same host`);
  }
  await waitFor("Bob's backlog delivered", async () => (bobsReads() - from >= WEBHOOKS * READS ? true : undefined), 90_000);
  // Bob's receivers slow: each answer after 6 s. His attempts in flight, each a socket and its
  // buffers, stop at his account's bound (without it: 128 per sync and host, and 128 more per
  // webhook to other hosts: 100 webhooks, past a process's file limit).
  for (let i = 0; i < WEBHOOKS; i++) receiver.delays.set(`/bob/${i}`, 6_000);
  try {
    const again = bobsReads();
    const second = await request(svc.api, 'POST', `/api/syncs/${bobSync}/backfills`, { token: bob.token, body: {} });
    assert.is(second.status, 202, second.text);
    await waitFor("Bob's attempts in flight up to his bound", async () => (receiver.delayed >= IN_FLIGHT ? true : undefined), 60_000);
    for (let i = 0; i < 3; i++) {
      const took = await alicesChange(`${i} beside Bob's slow receivers`);
      assert.ok(took < 2_000, `Alice's change reached her webhook ${took} ms after its event, beside Bob's slow answers from the same host`);
    }
    assert.ok(bobsReads() - again < WEBHOOKS * READS, "Bob's slow backlog is still going out");
    assert.ok(receiver.mostDelayed <= IN_FLIGHT, `${receiver.mostDelayed} of Bob's attempts in flight at once, over his account's ${IN_FLIGHT}`);
  } finally {
    receiver.delays.clear();
  }
});

test.run();
