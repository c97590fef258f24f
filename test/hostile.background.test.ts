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
import { DEFAULT_TENANT_LIMITS } from '../src/tenancy/limits.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { TestReceiver } from './harness/receiver.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, TEST_BASES, type TestAccount, type TestService } from './harness/service.ts';

const WEBHOOKS = 10;
const READS = 120;
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
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
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

test.run();
