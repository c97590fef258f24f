/**
 * How Stripe changes are applied to a sync database (a real one): the version guard against
 * stale events, tombstones, inline child lists, and object types no table holds.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { inTransaction, withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { changeOf } from '../src/stripe/events.ts';
import { applyChanges, type Change } from '../src/stripe/store.ts';
import { ensureTables } from '../src/stripe/tables.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { STRIPE_SCHEMA } from '../src/stripe/migrations.ts';
import { fileLogger } from './harness/test-log.ts';

let pool: pg.Pool;

test.before(async () => {
  const logger = fileLogger();
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'store-test-password', logger, 5, [STRIPE_SCHEMA]);
  pool = new pg.Pool({ connectionString: withDatabase(serverAdminUrl(), name) });
  await ensureTables(pool, logger);
});
test.after(async () => {
  await pool?.end();
});

const apply = (changes: Change[]) => inTransaction(pool, (tx) => applyChanges(tx, changes));
const customer = (name: string) => ({ id: 'cus_GUARD', object: 'customer', name, created: 1_700_000_000, balance: 0, livemode: false });
const rows = async (sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows;

test('a change older than the row is dropped; a newer one lands', async () => {
  const first = await apply([{ object: customer('from the backfill'), version: 2000 }]);
  assert.equal(first, { written: 1, deleted: 0, stale: 0, unknown: 0, byTable: first.byTable });
  assert.equal([...first.byTable!], [['customer', { inserted: 1, updated: 0, deleted: 0 }]], 'a row not there is counted inserted');
  const older = await apply([{ object: customer('an older event'), version: 1000 }]);
  assert.equal(older, { written: 0, deleted: 0, stale: 1, unknown: 0 });
  assert.equal(await rows('SELECT name FROM public.customer WHERE id = $1', ['cus_GUARD']), [{ name: 'from the backfill' }]);
  const newer = await apply([{ object: customer('a newer event'), version: 3000 }]);
  assert.equal([...newer.byTable!], [['customer', { inserted: 0, updated: 1, deleted: 0 }]], 'a row that differed is counted updated');
  assert.equal(await rows('SELECT name FROM public.customer WHERE id = $1', ['cus_GUARD']), [{ name: 'a newer event' }]);
});

test('a deletion leaves a tombstone: no later change brings the row back', async () => {
  const deleted = changeOf({ id: 'evt_1', type: 'customer.deleted', created: 4, data: { object: customer('gone') } });
  assert.ok(deleted.deleted);
  assert.is(deleted.version, 4999, 'an event counts as of the end of its second');
  await apply([{ ...deleted, version: 4000 }]);
  assert.equal(await rows('SELECT id FROM public.customer WHERE id = $1', ['cus_GUARD']), []);
  const late = await apply([{ object: customer('a late update'), version: 5000 }]);
  assert.is(late.stale, 1);
  assert.equal(await rows('SELECT id FROM public.customer WHERE id = $1', ['cus_GUARD']), []);
});

test('customer.subscription.deleted is a cancellation, not a deletion', () => {
  const canceled = changeOf({
    id: 'evt_2',
    type: 'customer.subscription.deleted',
    created: 5,
    data: { object: { id: 'sub_1', object: 'subscription', status: 'canceled' } },
  });
  assert.not.ok(canceled.deleted);
});

test('objects of a type no table holds are counted and ignored', async () => {
  const result = await apply([{ object: { id: 'holo_1', object: 'hologram', shine: 3 }, version: 1 }]);
  assert.equal(result, { written: 0, deleted: 0, stale: 0, unknown: 1 });
});

test('an inline list writes its children and, when complete, removes the ones no longer in it', async () => {
  const item = (id: string, quantity: number) => ({ id, object: 'subscription_item', subscription: 'sub_INLINE', quantity, created: 1_700_000_000 });
  const subscription = (items: unknown[], status = 'active') => ({
    id: 'sub_INLINE',
    object: 'subscription',
    status,
    customer: 'cus_X',
    created: 1_700_000_000,
    items: { object: 'list', data: items, has_more: false, url: '/v1/subscription_items?subscription=sub_INLINE' },
  });
  await apply([{ object: subscription([item('si_A', 1), item('si_B', 2)]), version: 1000 }]);
  assert.equal(await rows('SELECT id, quantity FROM public.subscription_item ORDER BY id'), [
    { id: 'si_A', quantity: '1' },
    { id: 'si_B', quantity: '2' },
  ]);
  // A stale copy of the subscription must not prune its newer items.
  await apply([{ object: subscription([item('si_A', 1), item('si_B', 2)]), version: 2000 }]);
  await apply([{ object: subscription([item('si_A', 9)]), version: 1500 }]);
  assert.is((await rows('SELECT count(*)::int AS n FROM public.subscription_item')).at(0)!.n, 2);
  // A newer one that dropped an item: the item goes.
  await apply([{ object: subscription([item('si_A', 5)], 'past_due'), version: 3000 }]);
  assert.equal(await rows('SELECT id, quantity FROM public.subscription_item ORDER BY id'), [{ id: 'si_A', quantity: '5' }]);
  assert.equal(await rows("SELECT status, items FROM public.subscription WHERE id = 'sub_INLINE'").then((r) => r[0].status), 'past_due');
});

test('a batch of parents with complete inline lists prunes each parent to its own list, within its account', async () => {
  const item = (sub: string, id: string) => ({ id, object: 'subscription_item', subscription: sub, quantity: 1, created: 1_700_000_000 });
  const subscription = (id: string, items: unknown[]) => ({
    id,
    object: 'subscription',
    status: 'active',
    customer: 'cus_X',
    created: 1_700_000_000,
    items: { object: 'list', data: items, has_more: false, url: `/v1/subscription_items?subscription=${id}` },
  });
  // Items per parent, first as loaded, then as a later page shows them: shrunk, kept, emptied, swapped.
  const before: Record<string, string[]> = { sub_B1: ['si_B1a', 'si_B1b', 'si_B1c'], sub_B2: ['si_B2a'], sub_B3: ['si_B3a', 'si_B3b'], sub_B4: ['si_B4a'] };
  const after: Record<string, string[]> = { sub_B1: ['si_B1b'], sub_B2: ['si_B2a'], sub_B3: [], sub_B4: ['si_B4z'] };
  const page = (lists: Record<string, string[]>, version: number, suffix = '') =>
    Object.entries(lists).map(([sub, ids]) => ({
      object: subscription(
        sub,
        ids.map((id) => item(sub, id + suffix)),
      ),
      version,
    }));
  const items = async (account: string | null) =>
    (await rows("SELECT id FROM public.subscription_item WHERE id LIKE 'si_B%' AND stripe_account IS NOT DISTINCT FROM $1 ORDER BY id", [account])).map(
      (r) => r.id,
    );
  await apply(page(before, 1000));
  // The same parents in a connected account (items of their own): another account's prune leaves them alone.
  await inTransaction(pool, (tx) => applyChanges(tx, page(before, 1000, 'o'), [], 'acct_OTHER'));
  await apply(page(after, 2000));
  assert.equal(await items(null), Object.values(after).flat().sort());
  assert.equal(
    await items('acct_OTHER'),
    Object.values(before)
      .flat()
      .map((id) => `${id}o`)
      .sort(),
  );
});

test.run();
