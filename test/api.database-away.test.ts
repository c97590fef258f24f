/**
 * While a database a route needs is away (the control database, or the server of a sync's
 * database, crashed and not yet back), every route of the management API and the event REST
 * interface answers what it can, and otherwise 503 with Retry-After: never a 500. The routes
 * are those the OpenAPI document lists, each called with the ids of a real sync. The
 * simulation once saw `POST /api/syncs/:id/backfills` answer 500 during a sync server's crash.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { loudSetUp, request } from './harness/service.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

let dir: string;
let control: CrashablePostgres;
let target: CrashablePostgres;
let s: StripeSyncSetUp;
let webhookId: string;
let backfillId: string;
let routes: Array<{ method: string; path: string }>;

test.before(
  loudSetUp(
    async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-away-'));
      await chmod(dir, 0o711); // the servers run as postgres, and live in folders below
      [control, target] = await Promise.all([
        CrashablePostgres.start('control', path.join(dir, 'control')),
        CrashablePostgres.start('sync', path.join(dir, 'sync')),
      ]);
      await query(control.adminUrl, 'CREATE DATABASE tributary_control');
      s = await backfilledStripeSync({
        key: 'sk_test_DATABASEAWAYAWAYAWAY00',
        seed: 53,
        customers: 3,
        pollIntervalMs: 500,
        config: {
          roles: ['api', 'sync', 'decoder', 'events'],
          webhookAllowPrivate: true,
          databaseUrl: control.databaseUrl('tributary_control'),
          targetDatabaseUrl: target.adminUrl,
        },
      });
      const token = s.account.token;
      const webhook = await request(s.svc.api, 'POST', `/api/syncs/${s.syncId}/webhooks`, {
        token,
        body: { url: 'http://127.0.0.1:9/in', topics: [`svc.${s.syncId}.customer`] },
      });
      assert.is(webhook.status, 201, webhook.text);
      webhookId = webhook.body.id;
      const backfill = await request(s.svc.api, 'POST', `/api/syncs/${s.syncId}/backfills`, { token, body: { collections: ['customer'] } });
      assert.ok(backfill.status === 201 || backfill.status === 202, backfill.text);
      backfillId = backfill.body.id;
      const doc = await request(s.svc.api, 'GET', '/api/openapi.json');
      routes = Object.entries(doc.body.paths as Record<string, Record<string, unknown>>).flatMap(([p, ops]) =>
        Object.keys(ops).map((method) => ({ method: method.toUpperCase(), path: p })),
      );
      assert.ok(routes.length > 20, `${routes.length} routes in the document`);
    },
    () => s?.svc,
  ),
);

test.after(async () => {
  await s?.svc.stop();
  await s?.fake.close();
  await Promise.all([control?.stop(), target?.stop()]);
  await rm(dir, { recursive: true, force: true });
});

/** The route's path with the sync's ids in it; undefined for a parameter it has no value for. */
function filled(p: string): string | undefined {
  const values: Record<string, string> = { id: s.syncId, wid: webhookId, webhookId, bid: backfillId, backfillId };
  const names = [...p.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  if (names.some((name) => values[name] === undefined)) return undefined;
  return p.replace(/\{([^}]+)\}/g, (_, name: string) => values[name]!);
}

/**
 * Calls every route it can fill (writes with an empty body; deletions only where `deletes`, as
 * they would succeed with the control database up) and answers those that were 500, or a 503
 * without Retry-After.
 */
async function sweep(deletes: boolean): Promise<{ wrong: string[]; called: number; unavailable: number }> {
  const wrong: string[] = [];
  let called = 0;
  let unavailable = 0;
  for (const route of routes) {
    const p = filled(route.path);
    if (!p || p.startsWith('/hooks/') || (route.method === 'DELETE' && !deletes)) continue;
    called++;
    // A wait holds for its timeout whether the database is there or not.
    const url = p.startsWith('/api/wait/') ? `${p}?timeout=2000` : p;
    const answer = await request(s.svc.api, route.method, url, {
      token: s.account.token,
      ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { body: {} }),
    });
    if (answer.status === 503) {
      unavailable++;
      if (!answer.headers.get('retry-after')) wrong.push(`${route.method} ${p}: 503 without Retry-After`);
    } else if (answer.status >= 500) wrong.push(`${route.method} ${p}: ${answer.status} ${answer.text.slice(0, 120)}`);
  }
  return { wrong, called, unavailable };
}

async function eventsRest(): Promise<number> {
  const auth = `Basic ${Buffer.from(`${s.account.eventsUsername}:${s.account.eventsPassword}`).toString('base64')}`;
  const answer = await fetch(`http://127.0.0.1:${s.svc.service.eventsPort}/topics`, { headers: { authorization: auth } });
  await answer.text();
  return answer.status;
}

test('the control database away: every route answers 503 with Retry-After or what it can, never 500', async () => {
  await control.crash();
  try {
    // Past the token's 5 s in memory: the check itself needs the database.
    await new Promise((r) => setTimeout(r, 5_500));
    const { wrong, called, unavailable } = await sweep(true);
    assert.equal(wrong, []);
    assert.ok(called > 20, `${called} routes called`);
    assert.ok(unavailable > 0, 'some answered 503');
    assert.is(await eventsRest(), 503);
    const health = await request(s.svc.api, 'GET', '/healthz');
    assert.is(health.status, 503);
  } finally {
    await control.start();
  }
  await waitFor(
    'the API again',
    async () => ((await request(s.svc.api, 'GET', `/api/syncs/${s.syncId}`, { token: s.account.token })).status === 200 ? true : undefined),
    30_000,
  );
});

test("the sync database's server away: the routes that read it answer 503, the others as usual", async () => {
  await target.crash();
  try {
    const { wrong, unavailable } = await sweep(false);
    assert.equal(wrong, []);
    assert.ok(unavailable > 0, 'the routes that read the sync database answered 503');
    const backfill = await request(s.svc.api, 'POST', `/api/syncs/${s.syncId}/backfills`, { token: s.account.token, body: { collections: ['customer'] } });
    assert.ok(backfill.status < 500 || (backfill.status === 503 && backfill.headers.get('retry-after')), `${backfill.status} ${backfill.text}`);
    assert.is((await request(s.svc.api, 'GET', `/api/syncs/${s.syncId}`, { token: s.account.token })).status, 200);
  } finally {
    await target.start();
  }
});

test.run();
