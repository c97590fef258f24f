/**
 * A hostile tenant filling the shared event log with backfills: two tiny syncs with a backfill
 * posted every 0.1 s grew it by 1.4 MB a second (11,210 events in 12 s, kept a week), unpaced.
 * An account's backfills are now paced (rows a second, per process) and bounded (backfills an
 * hour, rows a day, reads for one webhook included); past a bound the answer is a 429 that
 * names it, and a backfill that reaches the day's rows stops, failed, saying why.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../src/config.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
const LIMITS = { perHour: 4, rowsPerDay: 500, rowsPerSecond: 200 };

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'], webhookAllowPrivate: true, backfillLimits: LIMITS },
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, workerTickMs: 250, backfills: { chunkRows: 50, lookGapMs: 50 } },
      });
      account = await createAccount(svc);
      svc.airtable.base('appBBBBBBBBBBBBBB').generate({ seed: 3, tables: [{ name: 'Projects', records: 300 }] });
      syncId = (await createAirtableSync(svc, account, 'appBBBBBBBBBBBBBB')).id;
    },
    () => svc,
  ),
);
test.after(async () => svc?.stop());

const post = (id: string, who: TestAccount, body?: unknown) =>
  request(svc!.api, 'POST', `/api/syncs/${id}/backfills`, { token: who.token, ...(body === undefined ? {} : { body }) });
const finished = (id: string, who: TestAccount, backfill: string) =>
  waitFor(
    `backfill ${backfill} finished`,
    async () => {
      const view = await request(svc!.api, 'GET', `/api/syncs/${id}/backfills/${backfill}`, { token: who.token });
      return view.body.state === 'running' ? undefined : view.body;
    },
    60_000,
  );

test("an account's backfills read at most its rows a second", async () => {
  const created = await post(syncId, account);
  assert.is(created.status, 202, created.text);
  const done = await finished(syncId, account, created.body.id);
  assert.is(done.state, 'done', JSON.stringify(done));
  assert.is(done.rows, 300);
  // 300 rows at 200 a second, after a burst of 20: no sooner than 1.4 s.
  const took = Date.parse(done.finished_at) - Date.parse(done.created_at);
  assert.ok(took >= 1_300, `300 rows at 200 a second read in ${took} ms`);
});

test("a backfill stops, failed, at the account's rows of the day; the next is a 429 naming the bound", async () => {
  const created = await post(syncId, account);
  assert.is(created.status, 202, created.text);
  const stopped = await finished(syncId, account, created.body.id);
  assert.is(stopped.state, 'failed', JSON.stringify(stopped));
  assert.is(stopped.rows, 200, 'the 200 rows left of the 500');
  assert.match(stopped.error, /TRIBUTARY_BACKFILL_ROWS_PER_DAY_PER_ACCOUNT/);
  const refused = await post(syncId, account);
  assert.is(refused.status, 429, refused.text);
  assert.match(refused.body.error.message, /backfills have read 500 rows in the last day, its bound is 500 \(TRIBUTARY_BACKFILL_ROWS_PER_DAY_PER_ACCOUNT\)/);
  const retryAfter = Number(refused.headers.get('retry-after'));
  assert.ok(retryAfter > 86_000 && retryAfter <= 86_400, `Retry-After ${retryAfter} s: when the first of the day's backfills leaves the window`);
  // A webhook made with its own backfill is refused whole: no webhook without its reads.
  const webhook = await request(svc!.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: account.token,
    body: { url: 'http://127.0.0.1:9/hook', topics: [`svc.${syncId}.projects`], backfill: true },
  });
  assert.is(webhook.status, 429, webhook.text);
  assert.equal((await request(svc!.api, 'GET', `/api/syncs/${syncId}/webhooks`, { token: account.token })).body.data, []);
});

test('an account asks for at most its backfills an hour, whatever they read; other accounts are untouched', async () => {
  const other = await createAccount(svc!, 'hourly');
  svc!.airtable.base('appCCCCCCCCCCCCCC').generate({ seed: 4, tables: [{ name: 'Notes', records: 2 }] });
  const small = (await createAirtableSync(svc!, other, 'appCCCCCCCCCCCCCC')).id;
  for (let i = 0; i < LIMITS.perHour; i++) assert.is((await post(small, other)).status, 202, `backfill ${i + 1}`);
  const refused = await post(small, other);
  assert.is(refused.status, 429, refused.text);
  assert.match(
    refused.body.error.message,
    /this account has asked for 4 backfills in the last hour, its bound \(TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT\); retry in \d+ s/,
  );
  const retryAfter = Number(refused.headers.get('retry-after'));
  assert.ok(retryAfter > 3_500 && retryAfter <= 3_600, `Retry-After ${retryAfter} s`);
  assert.not.ok(svc!.logs.text.includes('"level":50'), 'no error-level line');
});

test("the bounds are the operator's: 60 an hour, a million rows a day, 50,000 rows a second unless the environment says", () => {
  assert.equal(loadConfig({}, {}).backfillLimits, { perHour: 60, rowsPerDay: 1_000_000, rowsPerSecond: 50_000 });
  const set = loadConfig(
    {
      TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT: '5',
      TRIBUTARY_BACKFILL_ROWS_PER_DAY_PER_ACCOUNT: '6',
      TRIBUTARY_BACKFILL_ROWS_PER_SECOND_PER_ACCOUNT: '7',
    },
    {},
  );
  assert.equal(set.backfillLimits, { perHour: 5, rowsPerDay: 6, rowsPerSecond: 7 });
  assert.throws(() => loadConfig({ TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT: 'many' }, {}), /TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT must be a whole number/);
});

test.run();
