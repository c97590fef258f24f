/**
 * Several syncs of one base share its 5 req/s, 3 of them the syncs'. Change capture polls on a
 * timer, and three syncs polling once a second want all of that share. Found in CI: with two
 * syncs of a base polling often, a field added upstream took over 20 s to reach a table. Every
 * poll was marked urgent, so polls went before the cycles (which alone read the schema) and
 * left them the one slot a second the quota promises sweeps. A poll is urgent only when a
 * wait request asked for it; the others take their turn with the cycles.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, loudSetUp, request, startTestService, waitOk, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let base: FakeBase;
type Sync = { id: string; account: TestAccount; url: string };
const syncs: Sync[] = [];

async function newSync(name: string): Promise<Sync> {
  const account = await createAccount(svc, name);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  return { id: created.body.id, account, url: created.body.database.url };
}

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'] },
        // Polls at their default pace (1 s): three syncs' polls alone are the syncs' whole share.
        tunables: { airtable: { cycleGapMs: 250, pacedCycleMs: 0 }, workerTickMs: 250 },
      });
      base = svc.airtable.createBase({ name: 'Shared' });
      base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords('Items', [{ Name: 'one' }, { Name: 'two' }]);
      for (let i = 0; i < 3; i++) syncs.push(await newSync(`tenant${i}`));
      for (const sync of syncs) await waitOk(svc, sync.account.token, sync.id, 60_000);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

/** The base's quota log since `since`, by kind: what the syncs were granted. */
async function grants(since: string): Promise<Record<string, number>> {
  const rows = await query<{ kind: string; n: number }>(
    svc.controlUrl,
    'SELECT kind, count(*)::int AS n FROM quota_requests WHERE key = $1 AND at > $2::timestamptz GROUP BY kind',
    [base.id, since],
  );
  return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
}
const now = async () => (await query<{ t: string }>(svc.controlUrl, 'SELECT clock_timestamp()::text AS t'))[0]!.t;
const hasColumn = async (sync: Sync, column: string) =>
  (await query(sync.url, "SELECT 1 FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'items' AND column_name = $1", [column]))
    .length === 1;

test('polls nobody waits on take their turn with the cycles; a waiter’s poll goes first', async () => {
  // Nobody waits: no request is urgent, though polls and cycles go on filling the share. (A
  // request that asked for the quota while the set-up's waits were still waiting may be in
  // its line yet: from when none is.)
  await waitFor(
    'no urgent request in the quota line',
    async () => ((await query<{ n: number }>(svc.controlUrl, 'SELECT count(*)::int AS n FROM quota_waiting WHERE rank = 1'))[0]!.n === 0 ? true : undefined),
    30_000,
  );
  const quiet = await now();
  base.createRecords('Items', [{ Name: 'three' }]);
  for (const sync of syncs) {
    await waitFor(
      `the new record in ${sync.id} (a timer poll or a sweep)`,
      async () => ((await query(sync.url, "SELECT 1 FROM public.items WHERE name = 'three'")).length === 1 ? true : undefined),
      30_000,
    );
  }
  const unasked = await grants(quiet);
  // Each sync read upstream to get the record: the window is not empty of requests.
  assert.ok((unasked.sync ?? 0) >= syncs.length, `polls and cycles went on: ${JSON.stringify(unasked)}`);
  assert.is(unasked.urgent ?? 0, 0, `no request nobody waits on is urgent: ${JSON.stringify(unasked)}`);

  // A wait request's poll is urgent.
  const asked = await now();
  base.createRecords('Items', [{ Name: 'four' }]);
  await waitOk(svc, syncs[0]!.account.token, syncs[0]!.id, 30_000);
  assert.equal(await query(syncs[0]!.url, "SELECT name FROM public.items WHERE name = 'four'"), [{ name: 'four' }]);
  const askedGrants = await grants(asked);
  if ((askedGrants.urgent ?? 0) < 1) {
    // What answered the wait instead, for the failure's message: the sync's latest cycle and pass.
    const [row] = await query<{ completed: string | null; started: string | null; through: string | null }>(
      svc.controlUrl,
      'SELECT completed_at::text AS completed, started_at::text AS started, confirmed_through::text AS through FROM syncs WHERE id = $1',
      [syncs[0]!.id],
    );
    assert.unreachable(`the waiter’s poll was urgent: grants since ${asked}: ${JSON.stringify(askedGrants)}; the sync then: ${JSON.stringify(row)}`);
  }
});

test('a field added upstream reaches every sync of the base: the cycles, which alone read the schema, go on', async () => {
  base.addField('Items', { name: 'Size', type: 'number', options: { precision: 0 } });
  for (const sync of syncs) await waitFor(`the new column in ${sync.id}`, async () => (await hasColumn(sync, 'size')) || undefined, 60_000);
});

test.run();
