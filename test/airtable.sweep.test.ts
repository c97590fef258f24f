import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { AirtableClient, AirtableError } from '../src/airtable/client.ts';
import { mapBase, type TableMapping } from '../src/airtable/schema.ts';
import { sweepTable, type SweepContext } from '../src/airtable/sweep.ts';
import { prepareRebuild, swapIn } from '../src/writer/swap.ts';
import { builtTable, loadBuilt } from '../src/airtable/tables.ts';
import { planMigration } from '../src/airtable/plan.ts';
import { Secret } from '../src/control/secrets.ts';
import { AIRTABLE_DEFAULT_SETTINGS } from '../src/airtable/settings.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { startFakeAirtable, type FakeAirtable, type FakeBase } from '../fakes/airtable/index.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

const TOKEN = 'patSWEEPSWEEPSWE.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const logger = fileLogger();
let fake: FakeAirtable;
let base: FakeBase;
let db: pg.Pool;
let mapping: TableMapping;

test.before(async () => {
  // Rate limit on, with a short lockout so a 429 test does not take 30 s.
  fake = await startFakeAirtable({ rateLimit: { perBasePerSecond: 5, perUserPerSecond: 50, lockoutMs: LOCKOUT_MS } });
  fake.addToken(TOKEN, { bases: '*' });
  base = fake.createBase({ name: 'Sweeps' });
  base.createTable('Items', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Count', type: 'number' },
  ]);
  base.createRecords(
    'Items',
    Array.from({ length: 250 }, (_, i) => ({ Name: `item ${i}`, Count: i })),
  );
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'unused-password', logger);
  db = new pg.Pool({ connectionString: withDatabase(serverAdminUrl(), name) });
  const tables = await client().schema();
  [mapping] = mapBase(tables, AIRTABLE_DEFAULT_SETTINGS) as [TableMapping];
  await prepareRebuild(db, builtTable(mapping, PUBLIC_SCHEMAS));
  await swapIn(db, builtTable(mapping, PUBLIC_SCHEMAS));
});
test.after(async () => {
  await db.end();
  await fake.close();
});

const LOCKOUT_MS = 1500;

function client(attempts = 3): AirtableClient {
  return new AirtableClient({ baseUrl: fake.url, token: new Secret(TOKEN), baseId: base.id, attempts, timeoutMs: 2000, lockoutMs: LOCKOUT_MS });
}

function context(airtable = client()): SweepContext {
  return { airtable, db, schemas: PUBLIC_SCHEMAS, logger, skip: () => false, createdMarginMs: 0 };
}

const count = async () => Number((await db.query('SELECT count(*) AS n FROM public.items')).rows[0].n);

test('a complete sweep writes every record, and a second one writes nothing', async () => {
  const first = await sweepTable(context(), mapping, 'public', { deleteMissing: true });
  assert.equal(first, { listed: 250, written: 250, inserted: 250, deleted: 0, unproven: 0 });
  const second = await sweepTable(context(), mapping, 'public', { deleteMissing: true });
  assert.equal(second, { listed: 250, written: 0, inserted: 0, deleted: 0, unproven: 0 }, 'an unchanged base writes no row');
  assert.is(await count(), 250);
});

test('an unchanged schema, read back from the database, plans a sweep and no COMMENT', async () => {
  // The mapping is kept as jsonb, which orders an object's keys its own way: a comparison by
  // key order saw every table as renamed and rewrote its COMMENTs each cycle, catalog
  // changes every walsender of the server had to decode.
  const plan = planMigration(mapBase(await client().schema(), AIRTABLE_DEFAULT_SETTINGS), await loadBuilt(db, PUBLIC_SCHEMAS));
  assert.equal(
    plan.sweep.map((m) => m.name),
    [mapping.name],
  );
  assert.equal(plan.recomment, []);
  assert.equal(plan.rebuild, []);
});

test('a listing that fails midway deletes nothing', async () => {
  const victims = base
    .records('Items')
    .slice(0, 5)
    .map((r) => r.id);
  base.deleteRecords('Items', victims);
  // Page 1 answers; page 2 fails for good.
  fake.faults.add({ match: { path: /listRecords$/ }, kind: 'delay', delayMs: 1, times: 1 });
  fake.faults.add({ match: { path: /listRecords$/ }, kind: 'status', status: 503, times: Infinity });
  try {
    await sweepTable(context(client(2)), mapping, 'public', { deleteMissing: true });
    assert.unreachable('the sweep must fail');
  } catch (error) {
    assert.instance(error, AirtableError);
  } finally {
    fake.faults.clear();
  }
  assert.is(await count(), 250, 'nothing deleted after a failed listing');
});

test('a truncated answer fails the sweep and deletes nothing', async () => {
  fake.faults.add({ match: { path: /listRecords$/ }, kind: 'truncate', times: Infinity });
  try {
    await sweepTable(context(client(2)), mapping, 'public', { deleteMissing: true });
    assert.unreachable('the sweep must fail');
  } catch (error) {
    // Cut short inside the body: either the HTTP layer or the JSON parse notices.
    assert.match((error as Error).message, /unreadable answer|listRecords/);
  } finally {
    fake.faults.clear();
  }
  assert.is(await count(), 250);
});

test('a 429 is waited out, not mistaken for an empty table', async () => {
  fake.faults.add({
    match: { path: /listRecords$/ },
    kind: 'status',
    status: 429,
    body: { errors: [{ error: 'RATE_LIMIT_REACHED', message: 'Rate limit exceeded. Please try again later' }] },
    times: 1,
  });
  const started = Date.now();
  const result = await sweepTable(context(client(3)), mapping, 'public', { deleteMissing: true });
  assert.ok(Date.now() - started >= LOCKOUT_MS, 'the lockout was waited out');
  assert.equal(result, { listed: 245, written: 0, inserted: 0, deleted: 5, unproven: 0 }, 'after the wait the sweep completes, and only then deletes');
  assert.is(await count(), 245);
});

test('a hanging answer times out and is retried; the sweep completes', async () => {
  fake.faults.add({ match: { path: /listRecords$/ }, kind: 'hang', times: 1 });
  const started = Date.now();
  const result = await sweepTable(context(client(3)), mapping, 'public', { deleteMissing: true });
  assert.is(result.listed, 245);
  assert.ok(Date.now() - started >= 2000, 'it waited for the 2 s timeout');
});

test('an expired iterator restarts the listing instead of failing', async () => {
  base.createRecords('Items', [{ Name: 'late', Count: 999 }]);
  fake.faults.add({ match: { path: /listRecords$/ }, kind: 'resetOffsets', times: 1 });
  const result = await sweepTable(context(), mapping, 'public', { deleteMissing: true });
  assert.is(result.listed, 246);
  assert.is(await count(), 246);
});

test('records created after the listing began are not deleted by it, and are handed on to be fetched by id', async () => {
  // A row the proxy or change capture writes while the listing runs: it cannot be in it, so the
  // listing proves nothing of it; only a fetch by id can say whether Airtable still has it.
  let inserted = false;
  const unproven: string[][] = [];
  const result = await sweepTable(
    {
      ...context(),
      unproven: (tableId, ids) => {
        assert.is(tableId, mapping.tableId);
        unproven.push(ids);
      },
      onPage: async () => {
        if (inserted) return;
        inserted = true;
        await db.query(`INSERT INTO public.items (id, created_time, name) VALUES ('recNEWERTHANLIST', now(), 'fresh')`);
      },
    },
    mapping,
    'public',
    { deleteMissing: true },
  );
  const rows = await db.query(`SELECT name FROM public.items WHERE id = 'recNEWERTHANLIST'`);
  assert.equal(rows.rows, [{ name: 'fresh' }]);
  assert.equal(unproven, [['recNEWERTHANLIST']]);
  assert.is(result.unproven, 1);
  await db.query(`DELETE FROM public.items WHERE id = 'recNEWERTHANLIST'`);
});

test.run();
