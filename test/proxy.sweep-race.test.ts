/**
 * A sweep page and a proxied write crossing: the page is asked for before the write and
 * arrives after it (a slow answer from the fake). The proxied write must stand: the page's
 * older copy of the record never shows in the database, and a record the proxy deleted is
 * not brought back by it. The same for a rebuild (a schema change), whose pages go to a new
 * table while proxied writes still go to the old one.
 */
import type Airtable from 'airtable';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withDatabase } from '../src/db/sql.ts';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { airtableJs as ok, waitForCycle } from './harness/airtable.ts';
import { waitFor } from './harness/process.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { raceSetUp, type TestProxy } from './harness/proxy.ts';
import { loudSetUp, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let base: FakeBase;
let proxy: TestProxy;
let reader: string;
let syncId: string;
/** The sync database's name, to read public_swap as its owner. */
let database: string;
let airtable: Airtable.Base;

/** How late the sweep's page arrives. */
const LATE_MS = 1500;

test.before(
  loudSetUp(
    async () => {
      // Sweeps back to back (never paced); change capture out of the way, so that only the sweep's page and
      // the proxy's write meet (change capture would refetch the record and hide the race).
      ({ svc, account, base, syncId, reader, proxy, airtable } = await raceSetUp(
        { airtable: { pollIntervalMs: 120_000, cycleGapMs: 200, pacedCycleMs: 0 }, workerTickMs: 100 },
        [{ Name: 'Seed', Count: 0 }],
      ));
      database = new URL(reader).pathname.slice(1);
    },
    () => svc,
  ),
);

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
});

/** Makes the next sweep page late, and returns once the fake has made it (as the base is now). */
async function latePageInFlight(): Promise<void> {
  svc.airtable.faults.add({ match: { method: 'POST', path: /\/listRecords$/ }, kind: 'lateAnswer', delayMs: LATE_MS });
  await waitFor('the sweep to ask for a page', async () => (svc.airtable.faults.active === 0 ? true : undefined), 20_000);
}

/** Every value `read` gives over `ms`, polled every 20 ms. */
async function watch<T>(ms: number, read: () => Promise<T>): Promise<T[]> {
  const seen: T[] = [];
  for (const end = Date.now() + ms; Date.now() < end; ) {
    seen.push(await read());
    await new Promise((r) => setTimeout(r, 20));
  }
  return seen;
}

test('a proxied update is not undone by a sweep page asked for before it', async () => {
  const [made] = await ok(airtable('Tasks').create([{ fields: { Name: 'Racer', Count: 1 } }]));
  const id = made!.id;
  // Let a whole sweep see the record as it is (Count 1), so the late page is the only stale copy.
  await waitForCycle(svc, account.token, syncId, new Date());

  await latePageInFlight(); // holds Count 1
  await ok(airtable('Tasks').update(id, { Count: 2 }));
  const count = async () => (await query<{ count: string }>(reader, 'SELECT count FROM tasks WHERE id = $1', [id]))[0]?.count;
  assert.is(await count(), '2', 'written through before the answer');
  const seen = await watch(LATE_MS + 1500, count);
  assert.ok(!seen.includes('1'), `the sweep's older copy showed ${seen.filter((c) => c === '1').length} times in ${seen.length} reads`);
  assert.is(seen.at(-1), '2');
});

test('a record deleted through the proxy is not brought back by a sweep page asked for before the delete', async () => {
  const [made] = await ok(airtable('Tasks').create([{ fields: { Name: 'Doomed', Count: 5 } }]));
  const id = made!.id;
  await waitForCycle(svc, account.token, syncId, new Date());

  await latePageInFlight(); // still lists the record
  await ok(airtable('Tasks').destroy(id));
  const present = async () => (await query(reader, 'SELECT 1 FROM tasks WHERE id = $1', [id])).length > 0;
  assert.is(await present(), false, 'deleted before the answer');
  const seen = await watch(LATE_MS + 1500, present);
  assert.ok(!seen.includes(true), `the deleted record came back in ${seen.filter(Boolean).length} of ${seen.length} reads`);
});

test('a proxied update made during a rebuild is in the rebuilt table from the moment it goes in', async () => {
  const [made] = await ok(airtable('Tasks').create([{ fields: { Name: 'Rebuilt', Count: 1 } }]));
  const id = made!.id;
  await waitForCycle(svc, account.token, syncId, new Date());
  const owner = withDatabase(serverAdminUrl(), database);
  const rebuilding = async () => (await query<{ t: string | null }>(owner, "SELECT to_regclass('public_swap.tasks')::text AS t"))[0]!.t !== null;

  // Every page late from here on: the rebuild's page is asked for before the write below.
  svc.airtable.faults.add({ match: { method: 'POST', path: /\/listRecords$/ }, kind: 'lateAnswer', delayMs: LATE_MS, times: Infinity });
  try {
    base.addField('Tasks', { name: 'Notes', type: 'singleLineText' });
    await waitFor('the rebuild to begin', async () => ((await rebuilding()) ? true : undefined), 20_000);
    await new Promise((r) => setTimeout(r, 300)); // its page asked for, holding Count 1
    await ok(airtable('Tasks').update(id, { Count: 2 }));
    const count = async () => (await query<{ count: string }>(reader, 'SELECT count FROM tasks WHERE id = $1', [id]))[0]?.count;
    assert.is(await count(), '2', 'written through before the answer');

    const seen: string[] = [];
    const notes = async () => (await query(reader, "SELECT 1 FROM information_schema.columns WHERE table_name = 'tasks' AND column_name = 'notes'")).length > 0;
    let swappedAt = 0;
    for (const end = Date.now() + 30_000; Date.now() < end && (swappedAt === 0 || Date.now() < swappedAt + 1500); ) {
      seen.push((await count())!);
      if (swappedAt === 0 && (await notes())) swappedAt = Date.now();
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(swappedAt > 0, 'the rebuilt table went in');
    assert.ok(!seen.includes('1'), `the rebuild's older copy showed ${seen.filter((c) => c === '1').length} times in ${seen.length} reads`);
    assert.is(seen.at(-1), '2');
  } finally {
    svc.airtable.faults.clear();
  }
});

test.run();
