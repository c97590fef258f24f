/**
 * Change capture on its own (src/airtable/capture.ts), with a host made of real parts: the
 * fake Airtable's webhook, a provisioned sync database, a migrated control database, and a
 * refetch that fetches by id and writes through the writer. An edit upstream lands, a deleted
 * record goes, a debounced edit waits until stable, and a schema change or a table that is not
 * built asks for a cycle instead of pretending to be a pass.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ChangeCapture, type CaptureHost } from '../src/airtable/capture.ts';
import { AirtableClient } from '../src/airtable/client.ts';
import { RefetchQueue } from '../src/airtable/refetch-queue.ts';
import { mapBase, type TableMapping } from '../src/airtable/schema.ts';
import { AIRTABLE_DEFAULT_SETTINGS } from '../src/airtable/settings.ts';
import { AirtableSyncState } from '../src/airtable/sync-state.ts';
import { builtTable, rowOf, shapeOf } from '../src/airtable/tables.ts';
import { ensureWebhook } from '../src/airtable/webhook.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { Secret } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/sql.ts';
import { type FakeAirtable, type FakeBase, startFakeAirtable } from '../fakes/airtable/index.ts';
import { newDatabaseName } from '../src/ids.ts';
import { StatusReporter } from '../src/sync/status-reporter.ts';
import { prepareRebuild, swapIn } from '../src/writer/swap.ts';
import { deleteRows, upsertRows } from '../src/writer/upsert.ts';
import { freshDatabase, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { fileLogger } from './harness/test-log.ts';

const TOKEN = `patCapture.${randomBytes(16).toString('hex')}`;
const SYNC = 'syn_capturetest1';
const logger = fileLogger();
let fake: FakeAirtable;
let base: FakeBase;
let control: pg.Pool;
let target: pg.Pool;
let mapping: TableMapping;
const stop = new AbortController();
let state: AirtableSyncState;
let queue: RefetchQueue;
let gapsEnded = 0;
let running: Promise<unknown>;

test.before(async () => {
  fake = await startFakeAirtable({ rateLimit: false });
  fake.addToken(TOKEN, { bases: '*' });
  base = fake.createBase({ name: 'Capture' });
  base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
  const controlUrl = await freshDatabase('ctl');
  await migrateControlDatabase(controlUrl, logger);
  control = new pg.Pool({ connectionString: controlUrl, max: 2 });
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'capture-test', logger);
  target = new pg.Pool({ connectionString: withDatabase(serverAdminUrl(), name), max: 3 });

  const client = () => new AirtableClient({ baseUrl: fake.url, token: new Secret(TOKEN), baseId: base.id });
  [mapping] = mapBase(await client().schema(), AIRTABLE_DEFAULT_SETTINGS) as [TableMapping];
  await prepareRebuild(target, builtTable(mapping, PUBLIC_SCHEMAS));
  await swapIn(target, builtTable(mapping, PUBLIC_SCHEMAS));

  state = new AirtableSyncState();
  state.settings = { ...AIRTABLE_DEFAULT_SETTINGS };
  state.live.set(mapping.tableId, mapping);
  state.webhook = await ensureWebhook(client(), target, PUBLIC_SCHEMAS, logger);
  const refetch = async (c: AirtableClient, tableId: string, ids: string[]) => {
    const table = state.live.get(tableId)!;
    await upsertRows(
      target,
      shapeOf(table, 'public'),
      (await c.recordsById(tableId, ids)).map((r) => rowOf(table, r)),
    );
  };
  queue = new RefetchQueue({ fetch: (tableId, ids) => refetch(client(), tableId, ids), onFailed: () => state.needCycle(), onDrained: () => undefined, logger });
  const host: CaptureHost = {
    options: { syncId: SYNC, target, schemas: PUBLIC_SCHEMAS, logger, pollIntervalMs: 100 },
    signal: stop.signal,
    status: new StatusReporter({ control, target, schemas: PUBLIC_SCHEMAS, syncId: SYNC, logger }),
    queue,
    client: () => client(),
    refetch,
    deleteInTurn: async (tableId, ids) => {
      await deleteRows(target, shapeOf(state.live.get(tableId)!, 'public'), ids);
    },
    isPass: (failures) => queue.quietSince(failures) && state.needsCycle === 0 && state.nothingRebuilding,
    endGap: () => void gapsEnded++,
  };
  const capture = new ChangeCapture(state, host);
  running = Promise.all([capture.run(), queue.run(stop.signal, () => true)]);
});

test.after(async () => {
  stop.abort();
  await running;
  await target?.end();
  await control?.end();
  await fake?.close();
});

const names = async () => (await target.query<{ id: string; name: string }>('SELECT id, name FROM items ORDER BY name')).rows;

test('an edit and a delete upstream reach the table within a few polls', async () => {
  const [one, two] = base.createRecords('Items', [{ Name: 'One' }, { Name: 'Two' }]);
  await waitFor('both created', async () => ((await names()).length === 2 ? true : undefined), 10_000);
  base.updateRecord('Items', one!.id, { Name: 'One, edited' });
  base.deleteRecords('Items', [two!.id]);
  await waitFor(
    'the edit and the delete',
    async () => {
      const rows = await names();
      return rows.length === 1 && rows[0]!.name === 'One, edited' ? true : undefined;
    },
    10_000,
  );
});

test('with debounce_ms, an edit waits until the record has been stable that long', async () => {
  state.settings = { ...AIRTABLE_DEFAULT_SETTINGS, debounce_ms: 1500 };
  const [rec] = base.createRecords('Items', [{ Name: 'Slow 0' }]);
  const started = Date.now();
  await waitFor('the debounced record', async () => ((await names()).some((r) => r.id === rec!.id) ? true : undefined), 10_000);
  assert.ok(Date.now() - started >= 1400, `written after ${Date.now() - started} ms, not before it was stable for 1.5 s`);
  state.settings = { ...AIRTABLE_DEFAULT_SETTINGS };
});

test('a schema change or a table not built asks for a cycle: no poll is a pass until one completes', async () => {
  assert.is(state.needsCycle, 0);
  base.addField('Items', { name: 'Notes', type: 'multilineText' });
  await waitFor('the schema change noticed', async () => (state.needsCycle !== 0 ? true : undefined), 10_000);
  state.needsCycle = 0;
  base.createTable('Later', [{ name: 'Name', type: 'singleLineText' }]);
  await waitFor('the new table noticed', async () => (state.needsCycle !== 0 ? true : undefined), 10_000);
  assert.is(gapsEnded, 0, 'nobody waited, so no cycle was hurried');
});

test.run();
