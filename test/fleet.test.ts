/**
 * The Procfile's roles as a fleet of separate processes (two `api`, two `proxy`, one `events`,
 * three `worker` = sync,decoder) sharing one control database, over two target servers in two
 * regions, with Airtable and Stripe syncs under traffic (upstream creates, edits and deletes,
 * and writes through either proxy). A worker is SIGKILLed: its syncs and decoders move to the
 * others within the lease, and the workers' logs show no sync's runner or decoder ever ran on
 * two workers at once. The second server is stopped: only its syncs report trouble, the others
 * keep syncing; started again, its syncs catch up. At the end every sync's events, read from
 * offset 0 and folded per record, equal its database, and every database equals its upstream.
 *
 * The fakes run in this process with their rate limits off: this file is about the fleet, and
 * a 429 from a fake slowed by eight service processes beside it would only blur it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { compareFold, EventFold } from '../sim/check/events.ts';
import { readTables } from '../sim/check/canonical.ts';
import { RestTail } from '../sim/check/rest-events.ts';
import { type FakeAirtable, type FakeBase, startFakeAirtable } from '../fakes/airtable/index.ts';
import { type FakeStripe, startFakeStripe } from '../fakes/stripe/index.ts';
import type { FakeStripeAccount } from '../fakes/stripe/control.ts';
import { withDatabase } from '../src/db/sql.ts';
import { type Fleet, type FleetProcess, type FleetShared, fleetProcesses, fleetShared, overlaps, runSpans, startFleet } from './harness/fleet.ts';
import { freshDatabase, query, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';
import { AIRTABLE_TEST_TOKEN, request } from './harness/service.ts';

const AIRTABLE_SYNCS = 24;
const STRIPE_SYNCS = 6;
const HOME = 'us-west-2';
const AWAY = 'eu-central-1';
/** The sync lease (src/lease/worker.ts) and the workers' tick: a dead worker's syncs move on within their sum. */
const LEASE_MS = 30_000;
const TICK_MS = 2_000;

interface FleetSync {
  id: string;
  kind: 'airtable' | 'stripe';
  region: string;
  token: string;
  events: { restUrl: string; username: string; password: string };
  /** Admin URL of its database on its server. */
  adminDb: string;
  base?: FakeBase;
  account?: FakeStripeAccount;
}

let second: SecondServer;
let airtable: FakeAirtable;
let stripe: FakeStripe;
let shared: FleetShared;
let fleet: Fleet | undefined;
let apis: FleetProcess[] = [];
let proxies: FleetProcess[] = [];
let events: FleetProcess;
let workers: FleetProcess[] = [];
/** Two accounts (one holds at most 20 syncs by default): each sync's token and event credentials are its account's. */
const accounts: Array<{ token: string; events: { restUrl: string; username: string; password: string } }> = [];
const syncs: FleetSync[] = [];
/** When each worker was killed (the overlap check ends its spans there). */
const killedAt = new Map<string, number>();
let serial = 0;

const everyone = fleetProcesses;
const api = (i: number) => apis[i % apis.length]!.api;
const call = (method: string, route: string, body: unknown, as: string, i = serial++) => request(api(i), method, route, { token: as, body });

function dump(): string {
  return everyone()
    .map((p) => `--- ${p.name} (${p.roles})\n${p.output().split('\n').slice(-15).join('\n')}`)
    .join('\n');
}

/** Every process's log lines about one sync, for a failure's message. */
function logOf(sync: FleetSync): string {
  return everyone()
    .flatMap((p) =>
      p
        .output()
        .split('\n')
        .filter((line) => line.includes(sync.id))
        .map((line) => `${p.name} ${line}`),
    )
    .slice(-60)
    .join('\n');
}

/** Upstream traffic on one sync: Airtable a create, an edit and a delete; Stripe a new customer and an edit. */
function traffic(sync: FleetSync, round: string): void {
  if (sync.base) {
    const [first, second] = sync.base.records('Tasks');
    sync.base.createRecords('Tasks', [{ Name: `new ${round}`, Count: serial++ }]);
    if (first) sync.base.updateRecord('Tasks', first.id, { Name: `edited ${round}`, Count: serial++ });
    if (second) sync.base.deleteRecords('Tasks', [second.id]);
  } else {
    const [first] = sync.account!.all('customers');
    sync.account!.create('customers', { email: `${round}@example.com`, name: `Customer ${round}` });
    if (first) sync.account!.update('customers', first.id, { name: `edited ${round}` });
  }
}

/** What the upstream holds, and what the database holds, as `id name` lines. */
async function upstreamAndDatabase(sync: FleetSync): Promise<[string[], string[]]> {
  if (sync.base) {
    const upstream = sync.base.records('Tasks').map((r) => `${r.id} ${r.fields.Name}`);
    const rows = await query<{ id: string; name: string }>(sync.adminDb, 'SELECT id, name FROM tasks');
    return [upstream.sort(), rows.map((r) => `${r.id} ${r.name}`).sort()];
  }
  const upstream = sync.account!.all('customers').map((c) => `${c.id} ${c.name}`);
  const rows = await query<{ id: string; name: string }>(sync.adminDb, 'SELECT id, name FROM customer');
  return [upstream.sort(), rows.map((r) => `${r.id} ${r.name}`).sort()];
}

async function caughtUp(list: FleetSync[], what: string, timeoutMs = 60_000): Promise<void> {
  let last = '';
  await waitFor(
    what,
    async () => {
      for (const sync of list) {
        const [upstream, database] = await upstreamAndDatabase(sync).catch((error: Error) => [[], [error.message]]);
        if (upstream.join('\n') !== database.join('\n')) {
          last = `${sync.kind} ${sync.id} (${sync.region}): upstream\n  ${upstream.join('\n  ')}\ndatabase\n  ${database.join('\n  ')}\n${logOf(sync)}`;
          return undefined;
        }
      }
      return true;
    },
    timeoutMs,
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${last}`);
  });
}

/** Each sync's runner and decoder lease holders, from the control database. */
async function leases(): Promise<Array<{ id: string; lease_owner: string | null; decoder_lease_owner: string | null }>> {
  return query(shared.controlUrl, 'SELECT id, lease_owner, decoder_lease_owner FROM syncs ORDER BY id');
}

const pidOf = (owner: string | null) => (owner ? Number(owner.split(':').at(-2)) : undefined);

test.before(async () => {
  try {
    second = await startSecondServer({ maxConnections: 200 });
    airtable = await startFakeAirtable({ port: 0, rateLimit: false });
    airtable.addToken(AIRTABLE_TEST_TOKEN, { bases: '*' });
    stripe = await startFakeStripe({ port: 0, rateLimit: false });
    shared = fleetShared({
      controlUrl: await freshDatabase('ctl'),
      targetUrl: serverAdminUrl(),
      upstreams: `api.airtable.com=${airtable.url},api.stripe.com=${stripe.url}`,
    });
    fleet = await startFleet(shared, { api: 2, proxy: 2, events: 1, workers: 3 });
    ({ apis, proxies, workers } = fleet);
    events = fleet.events[0]!;
  } catch (error) {
    process.stderr.write(`set-up failed: ${(error as Error).stack}\n${dump()}\n`);
    await Promise.all(everyone().map((p) => p.kill('SIGKILL')));
    throw error;
  }
});

test.after(async () => {
  await fleet?.stop();
  await airtable?.close();
  await stripe?.close();
  await second?.stop();
});

test('the second server joins the pool in its region; syncs of both regions land on their server', async () => {
  const added = await request(api(0), 'POST', '/api/servers', { token: shared.adminToken, body: { url: second.adminUrl, region: AWAY, capacity: 50 } });
  assert.is(added.status, 201, added.text);
  for (const name of ['fleet-a', 'fleet-b']) {
    const account = await request(api(1), 'POST', '/api/accounts', { token: shared.adminToken, body: { name } });
    assert.is(account.status, 201, account.text);
    accounts.push({
      token: account.body.api_token,
      events: { restUrl: events.events, username: account.body.events.username, password: account.body.events.password },
    });
  }

  for (let i = 0; i < AIRTABLE_SYNCS + STRIPE_SYNCS; i++) {
    const region = i % 2 === 0 ? HOME : AWAY;
    let body: Record<string, unknown>;
    let base: FakeBase | undefined;
    let account: FakeStripeAccount | undefined;
    if (i < AIRTABLE_SYNCS) {
      base = airtable.createBase({ name: `Fleet ${i}` });
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Count', type: 'number', options: { precision: 0 } },
      ]);
      base.createRecords(
        'Tasks',
        Array.from({ length: 4 }, (_, n) => ({ Name: `task ${i}.${n}`, Count: n })),
      );
      body = { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN, region };
    } else {
      account = stripe.createAccount();
      const key = `sk_test_fleet${String(i).padStart(20, '0')}`;
      stripe.addKey(key, { account: account.id });
      for (let n = 0; n < 3; n++) account.create('customers', { email: `c${i}.${n}@example.com`, name: `Customer ${i}.${n}` });
      body = { kind: 'stripe', api_key: key, region };
    }
    const owner = accounts[Math.floor(i / 2) % 2]!;
    const created = await call('POST', '/api/syncs', body, owner.token, i);
    assert.is(created.status, 201, created.text);
    assert.is(created.body.database.region, region);
    const name = new URL(created.body.database.url).pathname.slice(1);
    const server = region === HOME ? serverAdminUrl() : second.adminUrl;
    syncs.push({
      id: created.body.id,
      kind: base ? 'airtable' : 'stripe',
      region,
      token: owner.token,
      events: owner.events,
      adminDb: withDatabase(server, name),
      base,
      account,
    });
  }
  const onSecond = await query<{ datname: string }>(second.adminUrl, "SELECT datname FROM pg_database WHERE datname LIKE 'tr\\_%'");
  assert.is(onSecond.length, syncs.filter((s) => s.region === AWAY).length, "the away region's databases are on the second server");
  await caughtUp(syncs, 'every sync to hold its upstream', 120_000);
  // Both kinds of lease are held, and by more than one worker (syncs were made while all three ran).
  // A lease that lapsed on a loaded machine is claimed again at the next tick: wait for both.
  const held = await waitFor(
    'both leases of every sync held',
    async () => {
      const now = await leases();
      return now.every((l) => l.lease_owner && l.decoder_lease_owner) ? now : undefined;
    },
    45_000,
  );
  const owners = new Set(held.flatMap((l) => [pidOf(l.lease_owner), pidOf(l.decoder_lease_owner)]));
  assert.ok(owners.size >= 2, `leases spread over ${owners.size} worker(s)`);
  for (const owner of owners)
    assert.ok(
      workers.some((w) => w.pid === owner),
      `lease owner pid ${owner} is one of the workers`,
    );
});

test('traffic upstream and through either proxy reaches every database', async () => {
  for (const sync of syncs) traffic(sync, `r1-${sync.id}`);
  // Proxied writes through both proxies: the row is in the database when the proxy answers.
  const airtableSyncs = syncs.filter((s) => s.base);
  for (let i = 0; i < 4; i++) {
    const sync = airtableSyncs[i]!;
    const proxy = proxies[i % 2]!;
    const response = await fetch(`${proxy.proxy}/api.airtable.com/v0/${sync.base!.id}/Tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ records: [{ fields: { Name: `proxied ${i}`, Count: i } }] }),
    });
    const text = await response.text();
    assert.is(response.status, 200, `${proxy.name}: ${text}`);
    const id = (JSON.parse(text) as { records: Array<{ id: string }> }).records[0]!.id;
    const rows = await query(sync.adminDb, 'SELECT name FROM tasks WHERE id = $1', [id]);
    assert.equal(rows, [{ name: `proxied ${i}` }], `${proxy.name} wrote through to ${sync.region}`);
  }
  await caughtUp(syncs, 'the traffic to reach every database');
});

test('SIGKILL a worker: its syncs and decoders move on within the lease, nothing lost', async () => {
  const held = await leases();
  const count = (w: FleetProcess) => held.filter((l) => pidOf(l.lease_owner) === w.pid || pidOf(l.decoder_lease_owner) === w.pid).length;
  const victim = [...workers].sort((a, b) => count(b) - count(a))[0]!;
  const itsSyncs = held.filter((l) => pidOf(l.lease_owner) === victim.pid).map((l) => l.id);
  const itsDecoders = held.filter((l) => pidOf(l.decoder_lease_owner) === victim.pid).map((l) => l.id);
  assert.ok(itsSyncs.length + itsDecoders.length > 0, 'the victim held something');
  const at = Date.now();
  await victim.kill('SIGKILL');
  killedAt.set(victim.name, at);
  // Changes made while its syncs have no runner.
  for (const sync of syncs) traffic(sync, `r2-${sync.id}`);
  const moved = await waitFor(
    "the dead worker's leases to move on",
    async () => {
      const now = await leases();
      const stuck = now.filter(
        (l) => pidOf(l.lease_owner) === victim.pid || pidOf(l.decoder_lease_owner) === victim.pid || !l.lease_owner || !l.decoder_lease_owner,
      );
      return stuck.length === 0 ? Date.now() - at : undefined;
    },
    LEASE_MS + 30_000,
  );
  process.stdout.write(
    `  ${victim.name} held ${itsSyncs.length} sync runners and ${itsDecoders.length} decoders; all moved on ${(moved / 1000).toFixed(1)} s after its SIGKILL\n`,
  );
  assert.ok(moved <= LEASE_MS + 2 * TICK_MS + 5_000, `moved on after ${moved} ms`);
  const survivors = new Set(workers.filter((w) => w !== victim).map((w) => w.pid));
  for (const l of await leases()) assert.ok(survivors.has(pidOf(l.lease_owner)!) && survivors.has(pidOf(l.decoder_lease_owner)!), JSON.stringify(l));
  await caughtUp(syncs, 'the changes made while the worker was dead to reach every database');
});

test('stop the second server: only its syncs report trouble, the others go on; back, they catch up', async () => {
  const home = syncs.filter((s) => s.region === HOME);
  const away = syncs.filter((s) => s.region === AWAY);
  await second.pause();
  const downAt = Date.now();
  for (const sync of syncs) traffic(sync, `r3-${sync.id}`);
  await caughtUp(home, "the home region's syncs to go on");
  const views = async (list: FleetSync[]) => Promise.all(list.map(async (s) => (await call('GET', `/api/syncs/${s.id}`, undefined, s.token)).body.status));
  const troubled = await waitFor(
    'every away sync to report trouble',
    async () => {
      const statuses = await views(away);
      return statuses.every((s) => s.indicator !== 'normal' && s.last_error) ? statuses : undefined;
    },
    60_000,
  );
  process.stdout.write(`  away syncs report trouble ${((Date.now() - downAt) / 1000).toFixed(1)} s after the stop: ${troubled[0].reason}\n`);
  for (const status of await views(home)) assert.is(status.indicator, 'normal', JSON.stringify(status));
  // A change upstream while it is down, and the home syncs still take changes.
  for (const sync of home) traffic(sync, `r4-${sync.id}`);
  await caughtUp(home, "the home region's syncs to go on");

  await second.resume();
  const upAt = Date.now();
  await caughtUp(away, 'the away syncs to catch up', 90_000);
  process.stdout.write(`  away syncs caught up ${((Date.now() - upAt) / 1000).toFixed(1)} s after the server came back\n`);
  await waitFor('the away syncs to be normal again', async () => ((await views(away)).every((s) => s.indicator === 'normal') ? true : undefined), 60_000);
  await caughtUp(syncs, 'every database to hold its upstream');
});

test('events folded per record equal each database; no sync ran on two workers at once', async () => {
  const violations: string[] = [];
  await waitFor(
    "every sync's events to equal its database",
    async () => {
      violations.length = 0;
      for (const sync of syncs) {
        const fold = new EventFold(`${sync.id} rest`).add(await new RestTail(sync.events, `svc.${sync.id}.`).next());
        const database = await readTables(sync.adminDb);
        violations.push(
          ...[...fold.violations, ...compareFold(`${sync.id} rest`, fold, database)].map((v) => `${sync.kind} ${sync.region} ${v.check}: ${v.detail}`),
        );
      }
      return violations.length === 0 ? true : undefined;
    },
    60_000,
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${violations.join('\n')}`);
  });

  const now = Date.now();
  const spans = runSpans(workers, (w) => killedAt.get(w.name) ?? now);
  const parts = new Set(spans.map((s) => `${s.part} ${s.sync}`));
  assert.is(parts.size, syncs.length * 2, `a runner and a decoder span for every sync: ${[...parts].join(', ')}`);
  const moved = spans.filter((s) => killedAt.has(s.worker)).length;
  assert.ok(moved > 0, 'the killed worker ran something');
  assert.equal(overlaps(spans), []);
});

test.run();
