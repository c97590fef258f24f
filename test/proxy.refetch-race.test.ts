/**
 * Change capture fetching a record by id, crossing a proxied write: the fetch is asked for
 * before the write and answered after it (a slow answer from the fake). The proxied write
 * must stand: the fetch's older copy never shows in the database.
 */
import type Airtable from 'airtable';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { airtableJs as ok } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { raceSetUp, type TestProxy } from './harness/proxy.ts';
import { loudSetUp, type TestService } from './harness/service.ts';

let svc: TestService;
let base: FakeBase;
let proxy: TestProxy;
let reader: string;
let airtable: Airtable.Base;

/** How late the change-capture fetch arrives. */
const LATE_MS = 1500;

test.before(
  loudSetUp(
    async () => {
      // Change capture polls often; after the first cycle no sweep comes for minutes, so every
      // listing the fake sees is a fetch by id.
      ({ svc, base, reader, proxy, airtable } = await raceSetUp({ airtable: { pollIntervalMs: 200, cycleGapMs: 600_000 }, workerTickMs: 100 }, [
        { Name: 'Racer', Count: 1 },
      ]));
    },
    () => svc,
  ),
);

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
});

test('a proxied update is not undone by a change-capture fetch asked for before it', async () => {
  const id = base.records('Tasks')[0]!.id;
  const count = async () => (await query<{ count: string }>(reader, 'SELECT count FROM tasks WHERE id = $1', [id]))[0]?.count;
  await waitFor('the record', async () => ((await count()) === '1' ? true : undefined), 10_000);

  // A change made straight in Airtable: change capture fetches the record, and its answer
  // (Count 2) is late.
  svc.airtable.faults.add({ match: { method: 'POST', path: /\/listRecords$/ }, kind: 'lateAnswer', delayMs: LATE_MS });
  base.updateRecord('Tasks', id, { Count: 2 });
  await waitFor('change capture to ask for the record', async () => (svc.airtable.faults.active === 0 ? true : undefined), 10_000);

  await ok(airtable('Tasks').update(id, { Count: 3 }));
  assert.is(await count(), '3', 'written through before the answer');
  const seen: string[] = [];
  for (const end = Date.now() + LATE_MS + 3500; Date.now() < end; ) {
    seen.push((await count())!);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(!seen.includes('2'), `the fetch's older copy showed ${seen.filter((c) => c === '2').length} times in ${seen.length} reads`);
  assert.is(seen.at(-1), '3');
});

test.run();
