/**
 * The external check of the Stripe schema: a full backfill against stripe-mock (Stripe's
 * own mock, driven by Stripe's OpenAPI spec) lands every object it lists in its table,
 * with every field the object carries in a column and no insert refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadCatalog, STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { query } from './harness/postgres.ts';
import { createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService, waitBackfilled } from './harness/service.ts';
import { startStripeMock, type StripeMock } from './harness/stripe-mock.ts';

let mock: StripeMock;
let svc: TestService;
let account: TestAccount;

test.before(
  loudSetUp(
    async () => {
      mock = await startStripeMock();
      svc = await startTestService({
        config: { roles: ['api', 'sync'] },
        tunables: { workerTickMs: 250, stripe: { pollIntervalMs: 250 } },
        stripeUrl: mock.url,
      });
      account = await createAccount(svc);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await mock?.stop();
});

async function get(path: string): Promise<any> {
  const res = await fetch(mock.url + path, { headers: { authorization: 'Bearer sk_test_123', 'stripe-version': STRIPE_API_VERSION } });
  return res.json();
}

test('a backfill from stripe-mock lands every listed object in its table, every field in a column', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: 'sk_test_123' } });
  assert.is(created.status, 201, created.text);
  const syncId = created.body.id;
  const reader = created.body.database.url;
  const view = await waitBackfilled(svc.api, account.token, syncId).catch((error: unknown) => {
    console.error(svc.logs.text.split('\n').slice(-40).join('\n'));
    throw error;
  });
  assert.is(view.status.last_error, null, 'no failed cycle');
  assert.not.match(svc.logs.text, /"level":(50|60)/, 'nothing logged as an error');

  const columns = await query<{ table_name: string; column_name: string }>(
    reader,
    "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'",
  );
  const byTable = new Map<string, Set<string>>();
  for (const c of columns) byTable.set(c.table_name, (byTable.get(c.table_name) ?? new Set()).add(c.column_name));

  let checked = 0;
  const problems: string[] = [];
  for (const table of loadCatalog().tables) {
    const list = table.lists.find((l) => !l.parent);
    if (!list) continue;
    const page = await get(`${list.path}?limit=1${list.query ? `&${new URLSearchParams(list.query)}` : ''}`);
    if (!Array.isArray(page.data) || page.data.length === 0) continue;
    for (const object of page.data) {
      // A polymorphic list's items belong to their own object's table.
      const target = loadCatalog().tables.find((t) => t.object === object.object) ?? table;
      const have = byTable.get(target.table);
      if (!have) {
        problems.push(`${list.path}: no table ${target.table}`);
        continue;
      }
      const missing = Object.keys(object).filter((k) => k !== 'object' && !have.has(k));
      if (missing.length) problems.push(`${target.table}: fields without a column: ${missing.join(', ')}`);
      const rows = await query(reader, `SELECT id FROM public."${target.table}" WHERE id = $1`, [object.id]);
      if (rows.length !== 1) problems.push(`${target.table}: ${object.id} (from ${list.path}) not in the table`);
      checked++;
    }
  }
  const after = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.equal(after.body.warnings, [], 'no list was skipped');
  assert.equal(problems, [], problems.join('\n'));
  assert.ok(checked >= 60, `stripe-mock listed ${checked} objects`);
});

test.run();
