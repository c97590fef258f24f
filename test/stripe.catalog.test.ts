import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildCatalog, readSpec, renderCatalog, stripeMockSpecPath } from '../scripts/stripe-catalog.ts';
import { CATALOG_PATH, STRIPE_API_VERSION, STRIPE_MOCK_VERSION, loadCatalog, tableForObject, type CatalogTable } from '../src/stripe/catalog.ts';

function table(object: string): CatalogTable {
  const found = tableForObject(object);
  if (!found) throw new Error(`no table for ${object}`);
  return found;
}

function column(object: string, name: string) {
  return table(object).columns.find((c) => c.name === name);
}

test('the committed catalog is exactly what the generator makes of the pinned stripe-mock spec', () => {
  // No skip: a missing Go toolchain or module must fail loudly, never pass quietly.
  const spec = readSpec(stripeMockSpecPath());
  assert.is(spec.info.version, STRIPE_API_VERSION, 'spec version');
  const generated = renderCatalog(buildCatalog(spec));
  const committed = readFileSync(CATALOG_PATH, 'utf8');
  if (generated !== committed) {
    const [a, b] = [generated.split('\n'), committed.split('\n')];
    const line = a.findIndex((l, i) => l !== b[i]);
    assert.unreachable(
      `catalog.json is stale at line ${line + 1}:\n  generated: ${a[line]}\n  committed: ${b[line]}\nrun: node --import tsx scripts/stripe-catalog.ts`,
    );
  }
});

test('the loader reads the pinned version, once', () => {
  const catalog = loadCatalog();
  assert.is(catalog.apiVersion, '2026-08-26.dahlia');
  assert.is(catalog.stripeMockVersion, STRIPE_MOCK_VERSION);
  assert.is(loadCatalog(), catalog);
  assert.ok(catalog.tables.length >= 90, `${catalog.tables.length} tables`);
});

test('customer columns are typed from the spec', () => {
  const id = { name: 'id', type: 'text', description: 'Unique identifier for the object.' };
  assert.equal(table('customer').columns[0], id);
  const types = Object.fromEntries(table('customer').columns.map((c) => [c.name, c.type]));
  assert.equal(
    {
      created: types.created,
      balance: types.balance,
      delinquent: types.delinquent,
      metadata: types.metadata,
      default_source: types.default_source,
      address: types.address,
      currency: types.currency,
      preferred_locales: types.preferred_locales,
    },
    {
      created: 'timestamptz',
      balance: 'bigint',
      delinquent: 'boolean',
      metadata: 'jsonb',
      default_source: 'text',
      address: 'jsonb',
      currency: 'text',
      preferred_locales: 'text[]',
    },
  );
  assert.is(column('customer', 'default_source')?.expandable, true);
  assert.is(column('customer', 'email')?.expandable, undefined);
  assert.is(column('customer', 'object'), undefined);
  assert.is(column('coupon', 'percent_off')?.type, 'double precision');
  assert.is(column('invoiceitem', 'quantity_decimal')?.type, 'numeric');
});

test('lists name their parents', () => {
  const session = table('checkout.session');
  assert.is(session.table, 'checkout_session');
  assert.equal(session.lists[0], { path: '/v1/checkout/sessions', group: 'checkout' });

  assert.equal(table('subscription_item').lists, [
    { path: '/v1/subscription_items', parent: { table: 'subscription', queryParam: 'subscription' }, group: 'billing' },
  ]);
  assert.equal(table('line_item').lists, [{ path: '/v1/invoices/{invoice}/lines', parent: { table: 'invoice', pathParam: 'invoice' }, group: 'billing' }]);
  // Namespaced parents: an issuing token belongs to an issuing.card, not a payment card.
  assert.equal(table('issuing.token').lists[0]?.parent, { table: 'issuing_card', queryParam: 'card' });
  assert.equal(table('source_transaction').lists[0]?.parent, { table: 'source', pathParam: 'source' });
});

test('lists include what their defaults leave out', () => {
  const subscriptions = table('subscription').lists;
  assert.equal(subscriptions[0], { path: '/v1/subscriptions', query: { status: 'all' }, group: 'billing' });
  assert.ok(subscriptions.some((l) => l.parent?.table === 'test_helpers_test_clock' && l.query?.status === 'all'));
  assert.equal(
    table('price').lists.map((l) => l.query),
    [undefined, { active: 'false' }],
  );
});

test('every table is well formed', () => {
  const catalog = loadCatalog();
  const names = catalog.tables.map((t) => t.table);
  assert.equal(names, [...names].sort(), 'tables sorted by name');
  const known = new Set(names);
  for (const t of catalog.tables) {
    assert.is(t.table, t.object.replaceAll('.', '_'));
    assert.equal(t.columns[0]?.name, 'id', `${t.table} starts with id`);
    assert.is(t.columns[0]?.type, 'text');
    assert.ok(!t.object.startsWith('deleted_'), t.object);
    assert.ok(t.lists.length > 0, `${t.table} has a list`);
    if (t.lists.some((l) => !l.parent)) assert.is(t.lists[0]?.parent, undefined, `${t.table}: top-level list first`);
    for (const l of t.lists) {
      assert.ok(!l.path.endsWith('/search'), l.path);
      if (!l.parent) continue;
      assert.ok(known.has(l.parent.table), `${l.path}: parent ${l.parent.table}`);
      assert.ok(Boolean(l.parent.pathParam) !== Boolean(l.parent.queryParam), l.path);
      if (l.parent.pathParam) assert.ok(l.path.includes(`{${l.parent.pathParam}}`), l.path);
    }
  }
  // The events feed is also a table, the one whose rows outlive the upstream's list.
  const event = tableForObject('event');
  assert.equal(
    event?.lists.map((l) => l.path),
    ['/v1/events'],
  );
  assert.is(event?.retained, true);
  assert.equal(Object.fromEntries(event!.columns.filter((c) => ['created', 'data', 'type', 'request'].includes(c.name)).map((c) => [c.name, c.type])), {
    created: 'timestamptz',
    data: 'jsonb',
    request: 'jsonb',
    type: 'text',
  });
  assert.equal(
    catalog.tables.filter((t) => t.retained).map((t) => t.table),
    ['event'],
  );
});

test.run();
