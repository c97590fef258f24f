/**
 * Row keys across accounts, in a real sync database: where ids repeat across Stripe accounts
 * (products, plans and coupons with ids callers chose; capabilities named by what they allow),
 * each account's object is a row of its own, keyed `<account>/<id>`, and writes, deletions and
 * whole-list reads of one account leave the others' rows alone. A database built before the
 * key existed is moved onto it.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { inTransaction, withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { STRIPE_SCHEMA } from '../src/stripe/migrations.ts';
import { applyChanges, type Change, childListsOf } from '../src/stripe/store.ts';
import { ensureTables } from '../src/stripe/tables.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
const A = 'acct_1KeysAccountA00001';
const B = 'acct_1KeysAccountB00002';
let pool: pg.Pool;

async function freshStripeDatabase(): Promise<pg.Pool> {
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'keys-test-password', logger, 5, [STRIPE_SCHEMA]);
  const db = new pg.Pool({ connectionString: withDatabase(serverAdminUrl(), name) });
  await ensureTables(db, logger);
  return db;
}

test.before(async () => {
  pool = await freshStripeDatabase();
});
test.after(async () => {
  await pool?.end();
});

const apply = (changes: Change[], account: string | null, lists: Parameters<typeof applyChanges>[2] = []) =>
  inTransaction(pool, (tx) => applyChanges(tx, changes, lists, account));
const rows = async (sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows;
const product = (name: string) => ({ id: 'gold', object: 'product', name, created: 1_700_000_000, active: true, livemode: false });

test("the same product id in three accounts is three rows; one account's changes touch only its own", async () => {
  await apply([{ object: product('platform gold'), version: 1000 }], null);
  await apply([{ object: product('A gold'), version: 1000 }], A);
  await apply([{ object: product('B gold'), version: 1000 }], B);
  assert.equal(await rows("SELECT _key, stripe_account, name FROM public.product WHERE id = 'gold' ORDER BY _key"), [
    { _key: `${A}/gold`, stripe_account: A, name: 'A gold' },
    { _key: `${B}/gold`, stripe_account: B, name: 'B gold' },
    { _key: 'gold', stripe_account: null, name: 'platform gold' },
  ]);
  await apply([{ object: product('A gold, renamed'), version: 2000 }], A);
  // A's deletion leaves a tombstone for A's row alone: B's later update still lands.
  await apply([{ object: product('A gold, renamed'), version: 3000, deleted: true }], A);
  const renamed = await apply([{ object: product('B gold, renamed'), version: 2000 }], B);
  assert.equal(renamed, { written: 1, deleted: 0, stale: 0, unknown: 0, byTable: renamed.byTable });
  assert.equal([...renamed.byTable!], [['product', { inserted: 0, updated: 1, deleted: 0 }]]);
  assert.equal(await rows("SELECT _key, name FROM public.product WHERE id = 'gold' ORDER BY _key"), [
    { _key: `${B}/gold`, name: 'B gold, renamed' },
    { _key: 'gold', name: 'platform gold' },
  ]);
});

test("two connected accounts' capabilities of one name are two rows, keyed by the account they name", async () => {
  const capability = (account: string, status: string) => ({ id: 'card_payments', object: 'capability', account, status, requested: true });
  await apply([{ object: capability(A, 'active'), version: 1000 }], null);
  await apply([{ object: capability(B, 'inactive'), version: 1000 }], null);
  assert.equal(await rows('SELECT _key, account, status FROM public.capability ORDER BY _key'), [
    { _key: `${A}/card_payments`, account: A, status: 'active' },
    { _key: `${B}/card_payments`, account: B, status: 'inactive' },
  ]);
});

test("a whole list of one account's product features removes only that account's", async () => {
  const features = childListsOf('product').find((c) => c.table === 'product_feature')!;
  const feature = (id: string, lookup: string) => ({
    id,
    object: 'product_feature',
    entitlement_feature: { id: `feat_${lookup}`, lookup_key: lookup },
    livemode: false,
  });
  const read = (account: string, items: ReturnType<typeof feature>[], version: number) =>
    apply([], account, [{ child: features, parentId: 'gold', items, version }]);
  await read(A, [feature('prodft_A1', 'a1'), feature('prodft_A2', 'a2')], 1000);
  await read(B, [feature('prodft_B1', 'b1')], 1000);
  // A's list read again without A2: A2 goes, B's feature of its own `gold` stays.
  await read(A, [feature('prodft_A1', 'a1')], 2000);
  assert.equal(await rows("SELECT id, stripe_account FROM public.product_feature WHERE _parent_id = 'gold' ORDER BY id"), [
    { id: 'prodft_A1', stripe_account: A },
    { id: 'prodft_B1', stripe_account: B },
  ]);
  assert.equal(
    await rows("SELECT parent_id FROM public_swap._stripe_covered WHERE list LIKE '/v1/products/%' ORDER BY parent_id"),
    [{ parent_id: `${A}/gold` }, { parent_id: `${B}/gold` }],
    'each account covers its own parent',
  );
});

test('a database built before the account column and scoped keys is moved onto them', async () => {
  const old = await freshStripeDatabase();
  try {
    // As the previous version built them: keyed by id, with neither column.
    for (const table of ['product', 'capability']) {
      await old.query(`ALTER TABLE public.${table} DROP COLUMN _key, DROP COLUMN stripe_account`);
      await old.query(`ALTER TABLE public.${table} ADD PRIMARY KEY (id)`);
      await old.query(
        `UPDATE public_swap._tables SET mapping = jsonb_set(mapping, '{columns}', (mapping->'columns') - '_key' - 'stripe_account') WHERE upstream_id = $1`,
        [`stripe:${table}`],
      );
    }
    await old.query("INSERT INTO public.product (id, name) VALUES ('gold', 'kept')");
    await old.query(`INSERT INTO public.capability (id, account, status) VALUES ('card_payments', '${A}', 'active')`);
    await ensureTables(old, logger);
    assert.equal((await old.query('SELECT _key, id, stripe_account, name FROM public.product')).rows, [
      { _key: 'gold', id: 'gold', stripe_account: null, name: 'kept' },
    ]);
    assert.equal((await old.query('SELECT _key FROM public.capability')).rows, [{ _key: `${A}/card_payments` }]);
    const keys = await old.query<{ table: string; column: string }>(
      `SELECT c.conrelid::regclass::text AS table, a.attname AS column FROM pg_constraint c
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
        WHERE c.contype = 'p' AND c.conrelid IN ('public.product'::regclass, 'public.capability'::regclass) ORDER BY 1`,
    );
    assert.equal(keys.rows, [
      { table: 'capability', column: '_key' },
      { table: 'product', column: '_key' },
    ]);
    // And a connected account's gold now lands beside the platform's.
    await inTransaction(old, (tx) => applyChanges(tx, [{ object: product('A gold'), version: 1000 }], [], A));
    assert.is((await old.query("SELECT count(*)::int AS n FROM public.product WHERE id = 'gold'")).rows[0].n, 2);
  } finally {
    await old.end();
  }
});

test.run();
