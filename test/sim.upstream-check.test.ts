/**
 * The simulation's "database equals upstream" checkers against a real running sync: after the
 * first sync of a base and of a Stripe account they find nothing; after one column of one row
 * is changed and one row deleted behind the sync's back, they report exactly those two; a column
 * changed in a type-specific way (a checkbox as text, amounts in cents) is reported too.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withDatabase } from '../src/db/sql.ts';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../fakes/stripe/index.ts';
import { airtableMatchesUpstream } from '../sim/check/airtable-upstream.ts';
import { stripeMatchesUpstream } from '../sim/check/stripe-upstream.ts';
import type { Violation } from '../sim/types.ts';
import { waitForCycle } from './harness/airtable.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const KEY = 'sk_test_UPSTREAMCHECK0123456789';
let svc: TestService;
let fake: FakeStripe;
let upstream: FakeStripeAccount;
let account: TestAccount;
let base: FakeBase;
/** Admin URLs of the two sync databases (the checkers read public_swap, which readers cannot). */
let airtableDb: string;
let stripeDb: string;

const show = (violations: Violation[]) => violations.map((v) => `${v.check}: ${v.detail}`).join('\n');

async function createSync(body: Record<string, unknown>): Promise<{ id: string; adminUrl: string }> {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body });
  assert.is(created.status, 201, created.text);
  return { id: created.body.id, adminUrl: withDatabase(serverAdminUrl(), created.body.database.name) };
}

test.before(
  loudSetUp(
    async () => {
      fake = await startFakeStripe();
      upstream = fake.createAccount();
      upstream.generate({ seed: 11, customers: 12 });
      fake.addKey(KEY, { account: upstream.id });
      svc = await startTestService({
        config: { roles: ['api', 'sync'] },
        // One Airtable cycle only (no sweep would repair the tampered rows before the check).
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 600_000 }, workerTickMs: 250, stripe: { pollIntervalMs: 500 } },
        stripeUrl: fake.url,
      });
      account = await createAccount(svc);

      base = svc.airtable.createBase({ name: 'Upstream check' });
      base.addCollaborator({ email: 'kim@example.com', name: 'Kim' });
      base.createTable('Clients', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Revenue', type: 'currency' },
      ]);
      base.createTable('Projects 🚀', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Email', type: 'email' },
        { name: 'Budget', type: 'number', options: { precision: 2 } },
        { name: 'Done', type: 'checkbox' },
        { name: 'Due', type: 'date' },
        { name: 'When', type: 'dateTime' },
        { name: 'Took', type: 'duration' },
        { name: 'Tags', type: 'multipleSelects', options: { choices: [{ name: 'a' }, { name: 'b' }] } },
        { name: 'Owner', type: 'singleCollaborator' },
        { name: 'Files', type: 'multipleAttachments' },
        { name: 'Created', type: 'createdTime' },
        { name: 'Future', type: 'hologram' },
      ]);
      const clients = base.table('Clients');
      const revenue = clients.fields.find((f) => f.name === 'Revenue')!.id;
      const link = base.addField('Projects 🚀', { name: 'Clients', type: 'multipleRecordLinks', options: { linkedTableId: clients.id } });
      base.addField('Projects 🚀', {
        name: 'Client names',
        type: 'multipleLookupValues',
        options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: clients.primaryFieldId },
      });
      base.addField('Projects 🚀', {
        name: 'Client revenue',
        type: 'rollup',
        options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: revenue, function: 'SUM' },
      });
      base.addField('Projects 🚀', { name: 'Double', type: 'formula', options: { formula: '{Budget} * 2' } });
      const [acme, globex] = base.createRecords('Clients', [{ Name: 'Acme', Revenue: 1000 }, { Name: 'Globex', Revenue: 250.5 }, { Name: 'Initech' }]);
      base.createRecords('Projects 🚀', [
        {
          Name: 'Launch',
          Email: 'a@example.com',
          Budget: 1234.5,
          Done: true,
          Due: '2024-02-29',
          When: '2024-03-01T09:15:00.000Z',
          Took: 5400.25,
          Tags: ['a', 'b'],
          Owner: { email: 'kim@example.com' },
          Files: [{ url: 'https://example.com/f/plan.pdf' }],
          Future: { anything: [1, 2, 3] },
          Clients: [acme!.id, globex!.id],
        },
        { Name: 'Empty' },
        { Name: 'Half', Budget: 0, Clients: [globex!.id] },
      ]);

      const before = new Date();
      const [airtable, stripe] = await Promise.all([
        createSync({ kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN }),
        createSync({ kind: 'stripe', api_key: KEY }),
      ]);
      airtableDb = airtable.adminUrl;
      stripeDb = stripe.adminUrl;
      await waitForCycle(svc, account.token, airtable.id, before);
      await waitFor(
        'the Stripe backfill and its upcoming invoices',
        async () => {
          const view = await request(svc.api, 'GET', `/api/syncs/${stripe.id}`, { token: account.token });
          if (!view.body?.status?.completed_at) return undefined;
          const [due] = await query<{ n: string }>(stripeDb, 'SELECT count(*) AS n FROM public_swap._stripe_upcoming_due');
          return due!.n === '0' ? true : undefined;
        },
        45_000,
      );
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test('after the first sync, the Airtable database equals the base', async () => {
  const violations = await airtableMatchesUpstream({ base, databaseUrl: airtableDb });
  assert.equal(violations, [], show(violations));
  // The check looked at rows, not only at tables.
  const [row] = await query<{ n: string }>(airtableDb, 'SELECT count(*) AS n FROM public.projects');
  assert.is(row!.n, '3');
});

test('after the first sync, the Stripe database equals the account', async () => {
  const violations = await stripeMatchesUpstream({ account: upstream, databaseUrl: stripeDb });
  assert.equal(violations, [], show(violations));
  const [row] = await query<{ n: string }>(stripeDb, 'SELECT count(*) AS n FROM public.customer');
  assert.is(Number(row!.n), upstream.count('customers'));
});

test('a column changed and a row deleted behind the Airtable sync are exactly what it reports', async () => {
  const projects = base.table('Projects 🚀');
  const clients = base.table('Clients');
  const launch = base.records('Projects 🚀').find((r) => r.fields.Name === 'Launch')!;
  const initech = base.records('Clients').find((r) => r.fields.Name === 'Initech')!;
  await query(airtableDb, "UPDATE public.projects SET email = 'tampered@example.com' WHERE id = $1", [launch.id]);
  await query(airtableDb, 'DELETE FROM public.clients WHERE id = $1', [initech.id]);

  const violations = await airtableMatchesUpstream({ base, databaseUrl: airtableDb });
  assert.equal(
    violations.map((v) => v.detail).sort(),
    [
      `clients (${clients.id}) ${initech.id}: upstream, but missing from the database`,
      `projects (${projects.id}) ${launch.id}: column email is "tampered@example.com" in the database, "a@example.com" upstream`,
    ],
    show(violations),
  );
  assert.ok(violations.every((v) => v.check === 'db=upstream'));
});

test('the Airtable check knows the types itself: a checkbox turned text and amounts in cents are reported', async () => {
  // The oracle derives types and values from the base and the docs, not from the product's
  // mapping: a database changed in a type-specific way must not agree with itself.
  const projects = base.table('Projects 🚀');
  const clients = base.table('Clients');
  const done = projects.fields.find((f) => f.name === 'Done')!;
  await query(airtableDb, 'ALTER TABLE public.projects ALTER COLUMN done TYPE text USING done::text');
  await query(airtableDb, 'UPDATE public.clients SET revenue = revenue * 100');

  const violations = await airtableMatchesUpstream({ base, databaseUrl: airtableDb });
  const details = violations.map((v) => v.detail);
  const rows = base.records('Projects 🚀');
  assert.ok(
    details.includes(`table "Projects 🚀" (${projects.id}): column projects.done is text; the type table makes field "Done" (${done.id}, checkbox) boolean`),
    show(violations),
  );
  for (const r of rows) {
    const checked = r.fields.Done === true;
    assert.ok(details.includes(`projects (${projects.id}) ${r.id}: column done is "${checked}" in the database, ${checked} upstream`), show(violations));
  }
  for (const r of base.records('Clients').filter((c) => c.fields.Revenue !== undefined)) {
    assert.ok(
      details.some((d) => d.startsWith(`clients (${clients.id}) ${r.id}: column revenue is ${Number(r.fields.Revenue) * 100}`)),
      show(violations),
    );
  }
  // Besides these, only what the test before tampered with.
  assert.is(violations.length, 1 + rows.length + 2 + 2, show(violations));
});

test('a column changed and a row deleted behind the Stripe sync are exactly what it reports', async () => {
  const customer = upstream.all('customers').find((c) => typeof c.email === 'string')!;
  const charge = upstream.all('charges')[0]!;
  await query(stripeDb, "UPDATE public.customer SET email = 'tampered@example.com' WHERE id = $1", [customer.id]);
  await query(stripeDb, 'DELETE FROM public.charge WHERE id = $1', [charge.id]);

  const violations = await stripeMatchesUpstream({ account: upstream, databaseUrl: stripeDb });
  assert.equal(
    violations.map((v) => v.detail).sort(),
    [
      `charge ${charge.id}: upstream, but missing from the database`,
      `customer ${customer.id}: column email is "tampered@example.com" in the database, ${JSON.stringify(customer.email)} upstream`,
    ],
    show(violations),
  );
});

test('differences past the cap are summed up in one line per table', async () => {
  await query(stripeDb, "UPDATE public.customer SET description = 'x' WHERE description IS DISTINCT FROM 'x'");
  const customers = upstream.count('customers');
  const violations = await stripeMatchesUpstream({ account: upstream, databaseUrl: stripeDb, cap: 3 });
  const about = violations.filter((v) => v.detail.startsWith('customer ') || v.detail.startsWith('table customer:'));
  assert.is(about.length, 4, show(violations));
  // Every customer's description, plus the tampered email.
  assert.match(about[3]!.detail, new RegExp(`^table customer: ${customers + 1 - 3} more differences not listed \\(${customers + 1} in all\\)$`));
});

test("a connected account's rows: one missing, and one the database files under the wrong account, are reported", async () => {
  const url = new URL(fake.url);
  const stripe = new Stripe(KEY, { host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0 });
  const connected = await stripe.accounts.create({ type: 'custom' });
  const theirs = await stripe.customers.create({ email: 'connected@example.com' }, { stripeAccount: connected.id });
  const ours = upstream.all('customers').find((c) => typeof c.email === 'string')!;
  await query(stripeDb, 'UPDATE public.customer SET stripe_account = $1 WHERE id = $2', [connected.id, ours.id]);
  const details = (await stripeMatchesUpstream({ account: upstream, databaseUrl: stripeDb, cap: 100 })).map((v) => v.detail);
  assert.ok(details.includes(`customer ${theirs.id}: upstream, but missing from the database`), details.join('\n'));
  assert.ok(details.includes(`customer ${ours.id}: column stripe_account is "${connected.id}" in the database, NULL upstream`), details.join('\n'));
});

test.run();
