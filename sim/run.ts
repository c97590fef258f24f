import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import Stripe from 'stripe';
import type { Refusal } from '../fakes/shared/stats.ts';
import { pause } from '../src/time.ts';
import { CrashablePostgres } from '../test/harness/crashable-postgres.ts';
import { RelayThread, type ThreadRelay } from './relay-thread.ts';
import { startKafka } from '../test/harness/kafka/broker.ts';
import type { KafkaBroker } from '../test/harness/kafka/types.ts';
import { fleetShared, type FleetLayout } from '../test/harness/fleet.ts';
import { freePort } from '../test/harness/ports.ts';
import { readTables } from './check/canonical.ts';
import { compareFold, type DeliveredEvent, EventFold } from './check/events.ts';
import { readKafkaEvents } from './check/kafka-events.ts';
import { asWebhooksGetIt, loggedSince, samePath } from './check/paths.ts';
import { RestTail } from './check/rest-events.ts';
import {
  CI_FAULT_KINDS,
  clearFaults,
  FAULT_KINDS,
  type FaultKind,
  type FaultTargets,
  HOLDS_THE_FEEDS,
  SIM_SYNC_DB_QUERY_TIMEOUT_MS,
  strike,
  type StruckFault,
} from './faults.ts';
import { Pacer } from './pacer.ts';
import { Random } from './random.ts';
import { AirtableClient, StripeClient } from './traffic/clients.ts';
import { stripeBilling } from './traffic/stripe.ts';
import { stripeConnected } from './traffic/stripe-connect.ts';
import { expectedTables } from './check/stripe-expected.ts';
import type { TrafficActor, Violation } from './types.ts';
import { Upstreams } from './upstreams/remote.ts';
import { SIM_LAYOUT, ServiceFleet, WebhookReceiver } from './world.ts';
import { BackfillRequests } from './traffic/backfills.ts';
import { DestinationControls, type SyncHooks } from './traffic/destinations.ts';

export interface SimulationOptions {
  seed: number;
  /** How long traffic runs (faults included), before the quiet phase and the final checks. */
  minutes: number;
  upstreams: Array<'stripe' | 'airtable'>;
  /** Faults to strike, in turn, spread over the run; default all of them. */
  faults?: FaultKind[];
  /** Kinds that strike first, in this order (the rest follow in the seed's order). */
  first?: FaultKind[];
  /** With a broker: events also through Kafka, and the broker restarted as a fault. */
  kafka: boolean;
  /** Shortens the long faults (a webhook receiver down for minutes): 1 in a soak. */
  faultScale?: number;
  /**
   * How long the quiet phase (the syncs catching up, the webhook deliveries draining) may take
   * in all, default 20 minutes; what has not happened by then is a violation. A test sets it so
   * the run reports before the test's own time limit ends it.
   */
  quietMinutes?: number;
  /**
   * The service has a public URL (the API's balancer), so Airtable's webhooks ping it and change
   * capture reads when pinged, as a hosted service does. Default true; false polls every second.
   */
  pings?: boolean;
  log(line: string): void;
}

export interface SimulationReport {
  seed: number;
  minutes: number;
  operations: Map<string, { done: number; refused: number }>;
  events: Map<string, number>;
  faults: StruckFault[];
  checks: Map<string, number>;
  violations: Violation[];
  /** The largest process's resident memory. */
  memoryKb: { first: number; peak: number; last: number };
  /** Requests each process took through its role's balancer. */
  requests: Map<string, number>;
  /** The upstreams' process: how late its event loop ran (ms). */
  upstreamsLoopDelayMs?: { p99: number; max: number };
  /**
   * Liveness: from the last fault undone to every sync caught up (a wait answered ok, a
   * complete Airtable sweep, Stripe's upcoming invoices refreshed, every webhook delivery
   * backfill done), against the bound, the quiet phase. Past the bound, the waits that did not
   * end are violations.
   */
  convergence: { ms: number; boundMs: number };
}

/** The CI profile (test/simulation.test.ts, `npm run simulate -- --ci`): two minutes, short faults. */
export const CI_PROFILE = { minutes: 2, faultScale: 0.1, quietMinutes: 4, faults: [...CI_FAULT_KINDS] };

const AIRTABLE_TOKEN = `patSIMULATION0000.${'0123456789abcdef'.repeat(4)}`;
const BASE_ID = 'appSIMULATION0001';
const CLIENT_TABLE = 'Orders';
/** The sync databases' servers: the configured one, and one joined through the API. */
const REGIONS = ['us-west-2', 'eu-central-1'] as const;

const layoutOf = (l: FleetLayout) => `${l.api} api, ${l.proxy} proxy, ${l.events} events and ${l.workers} sync+decoder processes`;

interface SyncHandle {
  kind: 'stripe' | 'airtable';
  id: string;
  reader: string;
  adminDb: string;
}

/** No call of the API may take longer (the wait endpoint is asked for 30 s at most). */
const API_TIMEOUT_MS = 90_000;
/** The actors must stop soon after the traffic ends (TrafficActor); one that does not is named, not awaited. */
const STOP_TIMEOUT_MS = 30_000;

/** A small JSON client of the management API. */
async function api(base: string, token: string, method: string, route: string, body?: unknown): Promise<any> {
  const response = await fetch(base + route, {
    signal: AbortSignal.timeout(API_TIMEOUT_MS),
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause(500);
  }
}

/**
 * The whole service under account traffic and faults: fakes of both upstreams in a process
 * of their own, three PostgreSQL servers (the control database; sync databases in two
 * regions, the second joined through the API) and optionally a Kafka broker, all of which
 * faults can crash, and the service as a fleet of processes with split roles behind load
 * balancers, any of which faults can SIGKILL. Invariants are checked while the traffic runs
 * (read-after-write) and once it has quiesced.
 */
export async function simulate(options: SimulationOptions): Promise<SimulationReport> {
  const random = new Random(options.seed);
  const log = options.log;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-sim-'));
  // PostgreSQL runs as its own user (when this runs as root) and must reach its folders below.
  await chmod(dir, 0o711);
  const violations: Violation[] = [];
  const checks = new Map<string, number>();
  const checked = (name: string, n = 1) => checks.set(name, (checks.get(name) ?? 0) + n);
  const faults: StruckFault[] = [];
  /** The fault under way, if any. */
  let striking: FaultKind | undefined;
  const heldUntil = () =>
    striking && HOLDS_THE_FEEDS.includes(striking) ? Date.now() : Math.max(0, ...faults.filter((f) => HOLDS_THE_FEEDS.includes(f.kind)).map((f) => f.to));
  const closers: Array<() => Promise<unknown>> = [];
  const memory = { first: 0, peak: 0, last: 0 };
  const operations = new Map<string, { done: number; refused: number }>();
  const events = new Map<string, number>();
  try {
    log(`seed ${options.seed}: starting PostgreSQL (control, and a sync databases' server in each of two regions)`);
    const control = await CrashablePostgres.start('control', path.join(dir, 'control'));
    closers.push(() => control.stop());
    const servers = new Map<string, CrashablePostgres>();
    for (const region of REGIONS) {
      const server = await CrashablePostgres.start(`target ${region}`, path.join(dir, `target-${region}`));
      closers.push(() => server.stop());
      servers.set(region, server);
    }
    const [home, away] = REGIONS.map((region) => servers.get(region)!) as [CrashablePostgres, CrashablePostgres];
    const controlDb = `sim_control`;
    const admin = new pg.Client({ connectionString: control.adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${controlDb}`);
    await admin.end();

    let kafka: KafkaBroker | undefined;
    let kafkaPath: ThreadRelay | undefined;
    // The relays in front of the servers and upstreams run in a thread of their own (sim/relay-thread.ts).
    const relays = RelayThread.start();
    closers.push(() => relays.close());
    if (options.kafka) {
      log('starting Kafka');
      // The service reaches the broker through a relay that can hang (its bootstrap and every
      // connection after it: the broker advertises the relay); the checks read it directly.
      kafka = await startKafka({
        front: async (port) => {
          kafkaPath = await relays.relayTo(`tcp://127.0.0.1:${port}`);
          return kafkaPath.port;
        },
      });
      closers.push(() => kafka!.stop());
    }

    // Upstreams, in a process of their own: a test-mode Stripe account (test clocks exist
    // only there; 25 req/s) and a base of every field type.
    const stripeKey = `sk_test_SIM${randomBytes(12).toString('hex')}`;
    const upstreams = await Upstreams.start({ seed: options.seed, stripeKey, airtableToken: AIRTABLE_TOKEN, baseId: BASE_ID, clientTable: CLIENT_TABLE }, log);
    closers.push(() => upstreams.close());
    const receiver = await WebhookReceiver.start();
    closers.push(() => receiver.close());

    // Known before the processes start: it is their public URL, where Airtable pings.
    const apiPort = await freePort();
    const pings = options.pings ?? true;
    // Every process reaches the control database through a relay, which the control-db-hang fault
    // stops (bytes no longer pass, nothing closes); the checks here reach it directly.
    const controlPath = await relays.relayTo(control.adminUrl);
    // And each sync databases' server and each upstream, for the other hung paths and the slow
    // one. The checks, and the customers' own clients, reach them directly.
    const relayTo = (url: string) => relays.relayTo(url);
    const targetPaths = new Map<CrashablePostgres, ThreadRelay>();
    for (const server of servers.values()) targetPaths.set(server, await relayTo(server.adminUrl));
    const directly = (url: string) => [...targetPaths.values()].reduce((u, relay) => relay.around(u), url);
    const upstreamPaths = { stripe: await relayTo(upstreams.stripeUrl), airtable: await relayTo(upstreams.airtableUrl) };
    const shared = fleetShared({
      controlUrl: controlPath.through(control.databaseUrl(controlDb)),
      targetUrl: targetPaths.get(home)!.through(home.adminUrl),
      upstreams: `api.airtable.com=${upstreamPaths.airtable.through(upstreams.airtableUrl)},api.stripe.com=${upstreamPaths.stripe.through(upstreams.stripeUrl)}`,
      env: {
        TRIBUTARY_DEFAULT_REGION: REGIONS[0],
        TRIBUTARY_WEBHOOK_ALLOW_PRIVATE: '1',
        // The operator's knob for how long a sync statement may hang (5 min by default): the
        // hung path to a sync server is then over within the quiet phase's bound.
        TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S: String(SIM_SYNC_DB_QUERY_TIMEOUT_MS / 1000),
        // Audit rounds back to back, so one completes within the quiet phase (docs/stripe.md#the-audit).
        TRIBUTARY_STRIPE_AUDIT_EVERY_S: '1',
        ...(pings ? { TRIBUTARY_PUBLIC_URL: `http://127.0.0.1:${apiPort}` } : {}),
        ...(kafka ? { KAFKA_BROKERS: kafka.frontedBrokers!.join(',') } : {}),
      },
    });
    const adminToken = shared.adminToken;
    log(`starting the service: ${layoutOf(SIM_LAYOUT)}${pings ? ', Airtable pings to the API' : ''} (logs: ${path.join(dir, 'service', 'logs')})`);
    const service = await ServiceFleet.start(shared, path.join(dir, 'service'), SIM_LAYOUT, apiPort);
    closers.push(() => service.stop());
    const apiUrl = service.api.url;
    // The second server joins the pool through the API, in a region of its own.
    await api(apiUrl, adminToken, 'POST', '/api/servers', { url: targetPaths.get(away)!.through(away.adminUrl), region: REGIONS[1], capacity: 10 });

    const accountAnswer = await api(apiUrl, adminToken, 'POST', '/api/accounts', { name: 'simulated' });
    const token: string = accountAnswer.api_token;
    const rest = { restUrl: service.events.url, username: accountAnswer.events.username, password: accountAnswer.events.password };
    const syncs: SyncHandle[] = [];
    // One sync on each server, which on which by the seed.
    const regions = random.fork(7).chance(0.5) ? [...REGIONS] : [...REGIONS].reverse();
    for (const [i, kind] of options.upstreams.entries()) {
      const region = regions[i % regions.length]!;
      // The Stripe account is a platform: its connected accounts are synced too.
      const body =
        kind === 'stripe'
          ? { kind, api_key: stripeKey, region, settings: { connected_accounts: true } }
          : { kind, base_id: BASE_ID, api_key: AIRTABLE_TOKEN, region };
      const created = await api(apiUrl, token, 'POST', '/api/syncs', body);
      syncs.push({ kind, id: created.id, reader: directly(created.database.url), adminDb: servers.get(region)!.databaseUrl(created.database.name) });
      log(`${kind} sync ${created.id} created in ${region}`);
    }
    const hooked: SyncHooks[] = [];
    for (const sync of syncs) {
      await until(
        `the first ${sync.kind} sync`,
        async () => ((await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}`)).status.completed_at ? true : undefined),
        300_000,
      );
      // Webhooks for the collections that exist now, made before any traffic.
      const connection = await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}/connection`);
      const topics = (connection.events.topics as string[]).slice(0, 25);
      const hook = await api(apiUrl, token, 'POST', `/api/syncs/${sync.id}/webhooks`, { url: `${receiver.url}/${sync.id}`, topics });
      hooked.push({ syncId: sync.id, topics, webhook: { id: hook.id, secret: hook.secret, path: `/${sync.id}` } });
      log(`${sync.kind} sync ${sync.id} ready; webhooks on ${topics.length} topics`);
    }
    // A filtered destination and one that will answer 410 Gone, per sync (sim/traffic/destinations.ts).
    const controls = new DestinationControls({
      api: (method, route, body) => api(apiUrl, token, method, route, body),
      receiver,
      syncs: hooked,
      random: random.fork(8),
      log,
    });
    await controls.setUp();
    memory.first = memory.peak = (await service.memoryKb()) ?? 0;

    // Traffic.
    const wait = (syncId: string) => async () => (await api(apiUrl, token, 'GET', `/api/wait/${syncId}?timeout=30000`)).ok === true;
    const actors: TrafficActor[] = [];
    const readers: pg.Pool[] = [];
    for (const [i, sync] of syncs.entries()) {
      const reader = new pg.Pool({ connectionString: sync.reader, max: 2 });
      reader.on('error', () => undefined);
      readers.push(reader);
      const clientOptions = {
        random: random.fork(100 + i),
        reader,
        wait: wait(sync.id),
        violations,
        log,
        ...(sync.kind === 'stripe' ? { listedAfter: (id: string, atMs: number) => upstreams.stripeListedAfter(id, atMs), heldUntil } : {}),
      };
      if (sync.kind === 'stripe') {
        const url = new URL(upstreams.stripeUrl);
        const stripe = new Stripe(stripeKey, { host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0 });
        // Test mode: 25 req/s, of which the sync takes 20; the customer's backend has the rest
        // (its connected accounts' requests count against the platform too).
        actors.push(stripeBilling({ stripe, random: random.fork(1), log, maxRequestsPerSecond: 2 }));
        actors.push(stripeConnected({ stripe, random: random.fork(2), log, maxRequestsPerSecond: 1 }));
        actors.push(
          new StripeClient({ ...clientOptions, pacer: new Pacer(2), key: stripeKey, proxyPort: service.proxy.port, upstreamUrl: upstreams.stripeUrl }),
        );
      } else {
        // 5 req/s a base, of which the sync takes 3: the client (proxied and direct) keeps to 2.
        actors.push(upstreams.airtableUsers(2));
        actors.push(
          new AirtableClient({
            ...clientOptions,
            pacer: new Pacer(2, 150),
            token: AIRTABLE_TOKEN,
            baseId: BASE_ID,
            proxyUrl: service.proxy.url,
            upstreamUrl: upstreams.airtableUrl,
            table: CLIENT_TABLE,
            dbTable: 'orders',
            seqColumn: 'seq',
          }),
        );
      }
    }
    const backfills = new BackfillRequests({
      api: (method, route, body) => api(apiUrl, token, method, route, body),
      syncIds: syncs.map((s) => s.id),
      random: random.fork(7),
      log,
    });
    actors.push(backfills, controls);
    const stop = new AbortController();
    const running = actors.map((a) => a.run(stop.signal).catch((error: unknown) => log(`${a.name} stopped: ${(error as Error).message}`)));
    // The events are read and folded while the traffic runs (each update checked against the
    // fold as it arrives), and the fold compared with the database at the end.
    const logs = new Map(
      syncs.map((s) => [s.id, { tail: new RestTail(rest, `svc.${s.id}.`), fold: new EventFold(`${s.kind} rest`), all: [] as DeliveredEvent[] }]),
    );
    const readLogs = async (signal?: AbortSignal) => {
      for (const entry of logs.values()) {
        const more = await entry.tail.next(signal);
        entry.all.push(...more);
        entry.fold.add(more);
      }
    };
    const tailing = (async () => {
      while (!stop.signal.aborted) {
        await pause(30_000, stop.signal);
        // A fault may have the service down: the next read catches up. The end of the traffic
        // ends a read in flight too: during a hang of the control database's path, a REST read
        // waits up to the database's 30 s deadline, as long as the traffic is given to stop.
        await readLogs(stop.signal).catch(() => undefined);
      }
    })();
    const targets: FaultTargets = {
      service,
      control,
      controlPath,
      targets: [away, home],
      targetPaths: [targetPaths.get(away)!, targetPaths.get(home)!],
      targetCrashes: 0,
      targetHangs: 0,
      failovers: 0,
      upstreamPaths,
      kafka,
      kafkaPath,
      receiver,
      upstreams,
    };
    const endAt = Date.now() + options.minutes * 60_000;
    const kinds = (options.faults ?? [...FAULT_KINDS]).filter((k) => kafka || !k.startsWith('kafka-'));
    const order = [...kinds];
    for (let i = order.length - 1; i > 0; i--) {
      const j = random.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const first = (options.first ?? []).filter((k) => order.includes(k));
    order.splice(0, order.length, ...first, ...order.filter((k) => !first.includes(k)));
    // At most a minute between faults: a long run strikes every kind several times.
    const gapMs = Math.max(5000, Math.min(60_000, (options.minutes * 60_000) / Math.max(1, order.length + 1)));
    let next = 0;
    // Until the time is up and every kind of fault has struck once.
    while (Date.now() < endAt || next < order.length) {
      await pause(Math.max(1000, Math.min(gapMs, endAt - Date.now())));
      const kb = await service.memoryKb();
      if (kb) memory.peak = Math.max(memory.peak, kb);
      if (Date.now() >= endAt && next >= order.length) break;
      const kind = order[next++ % order.length]!;
      log(`fault: ${kind}`);
      try {
        striking = kind;
        faults.push(await strike(kind, targets, random.fork(1000 + next), options.faultScale ?? 1, stop.signal));
      } catch (error) {
        violations.push({ check: 'fault', detail: `${kind} could not be struck or undone: ${(error as Error).message}` });
      } finally {
        striking = undefined;
      }
    }

    // Quiet: traffic stops, every fault is undone; the syncs must catch up and turn normal.
    log('traffic stops; waiting for the syncs to catch up');
    stop.abort();
    const stopping = [
      ...actors.map((actor, i) => ({ name: actor.name, done: running[i]!, doing: () => actor.doing })),
      { name: 'the event tail', done: tailing, doing: () => undefined },
    ];
    for (const late of await stragglers(stopping, STOP_TIMEOUT_MS)) {
      const doing = late.doing();
      violations.push({
        check: 'health',
        detail: `${late.name} did not stop within ${STOP_TIMEOUT_MS / 1000} s of the end of the traffic${doing ? ` (doing: ${doing})` : ''}`,
      });
    }
    await clearFaults(targets);
    const quietFrom = Date.now();
    // Each wait below within what is left of the quiet phase's time.
    const quietEnds = quietFrom + (options.quietMinutes ?? 20) * 60_000;
    const within = (ms: number) => Math.max(1000, Math.min(ms, quietEnds - Date.now()));
    /**
     * Waits for a complete Airtable sweep that began after `from`: cycles run back to back, so
     * the start of one is noted, then the completion of it or a later one awaited. Returns when
     * the noted sweep began.
     */
    const completeSweep = async (sync: SyncHandle, from: number): Promise<number> => {
      let began: number | undefined;
      await until(
        'a complete sweep after the traffic',
        async () => {
          const [meta] = (await readMeta(sync.reader)) ?? [];
          if (!meta) return undefined;
          if (began === undefined && meta.started_at > from) began = meta.started_at;
          return began !== undefined && meta.completed_at >= began ? true : undefined;
        },
        within(300_000),
      ).catch((error) => violations.push({ check: 'health', detail: (error as Error).message }));
      return began ?? from;
    };
    const sweptFrom = new Map<string, number>();
    // The syncs catch up side by side, each through its steps: waited for one after another,
    // their times would add up (seed 8499: the Airtable sweep's 50 s after the Stripe audit's 155 s).
    const catchUp = async (sync: SyncHandle) => {
      await until(`${sync.kind} sync ${sync.id} to answer the wait with ok`, async () => ((await wait(sync.id)()) ? true : undefined), within(300_000)).catch(
        (error) => violations.push({ check: 'health', detail: (error as Error).message }),
      );
      // Each step's end, so that a slow convergence says where its time went.
      log(`${sync.kind} sync ${sync.id}: the wait answered ok`);
      // Changes made with no event are found by the audit: a whole round begun after the last of them.
      const silent = faults.filter((f) => f.kind === 'stripe-silent-edits').at(-1);
      if (sync.kind === 'stripe' && silent) {
        await until(
          'an audit round begun after the silent edits to complete',
          async () => {
            const audit = (await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}`)).drift.audit;
            return audit?.last_started_at && Date.parse(audit.last_started_at) >= silent.to ? true : undefined;
          },
          within(600_000),
        ).catch((error) => violations.push({ check: 'health', detail: (error as Error).message }));
        const audit = (await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}`)).drift.audit;
        log(`${sync.kind} sync ${sync.id}: an audit round begun after the silent edits completed (it took ${audit?.last_round_seconds ?? '?'} s)`);
      }
      if (sync.kind === 'stripe') {
        // Upcoming invoices are refreshed apart from the feed (no pass covers them): their queue must
        // drain, after the audit round too, whose fixes mark the previews they touch.
        await until(
          'the upcoming-invoice queue to drain',
          async () => ((await countRows(sync.adminDb, 'public_swap._stripe_upcoming_due')) === 0 ? true : undefined),
          within(300_000),
        ).catch((error) => violations.push({ check: 'health', detail: (error as Error).message }));
        log(`${sync.kind} sync ${sync.id}: the upcoming-invoice queue drained`);
      }
      if (sync.kind === 'airtable') {
        sweptFrom.set(sync.id, await completeSweep(sync, quietFrom));
        await wait(sync.id)();
        log(`${sync.kind} sync ${sync.id}: a complete sweep after the traffic`);
      }
    };
    await Promise.all(syncs.map(catchUp));
    // Deliveries back off exponentially while a receiver is down (up to an hour between
    // tries); after minutes down, the next try may be minutes away.
    const drainMs = 180_000 + 900_000 * (options.faultScale ?? 1);
    await controls.settle();
    await until('the webhook deliveries to drain', async () => ((await webhooksDrained(apiUrl, token, syncs)) ? true : undefined), within(drainMs)).catch(
      (error) => violations.push({ check: 'health', detail: (error as Error).message }),
    );

    // Caught up: what follows is the checks' own work (and, across an hour, one more sweep).
    const convergence = { ms: Date.now() - quietFrom, boundMs: quietEnds - quietFrom };
    checked('liveness: converged within the bound');
    if (convergence.ms > convergence.boundMs)
      violations.push({
        check: 'liveness',
        detail: `the syncs took ${Math.round(convergence.ms / 1000)} s to catch up, past the bound of ${convergence.boundMs / 1000} s`,
      });

    // Airtable renews attachment URLs on the hour (docs/airtable.md): a sweep that began in an
    // earlier hour than the check holds the URLs of that hour, so one more is awaited.
    const hourStart = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    for (const sync of syncs) {
      const began = sweptFrom.get(sync.id);
      if (began !== undefined && began < hourStart) await completeSweep(sync, hourStart);
    }

    // Every backfill asked for during the traffic has finished (its reads are folded below).
    const backfilled = await backfills.finished(within(300_000));
    violations.push(...backfilled.violations);
    checked('backfills done', backfilled.rows);

    // Final checks.
    await readLogs();
    for (const sync of syncs) {
      const view = await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}`);
      checked('health: sync normal');
      if (view.status.indicator !== 'normal')
        violations.push({ check: 'health', detail: `${sync.kind} sync ${sync.id} is ${view.status.indicator} after the traffic: ${view.status.last_error}` });
      violations.push(...(await upstreams.matches(sync.kind, sync.adminDb, view.settings)));
      checked('db=upstream');

      const { all: log_, fold } = logs.get(sync.id)!;
      events.set(`${sync.kind}: events (REST)`, log_.length);
      // Records are known by their row's key, as docs/events.md says: the upcoming invoices'
      // customer or subscription, `_key` where Stripe ids repeat across accounts (the checker's own rules).
      const database = await readTables(sync.adminDb, { keyOf: (table) => (sync.kind === 'stripe' ? (expectedTables().get(table)?.key ?? 'id') : 'id') });
      checked('events-fold (REST)', fold.events);
      violations.push(...fold.violations, ...compareFold(`${sync.kind} rest`, fold, database));
      const destinations = (await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}/webhooks`)).data as Array<{ topics: string[]; created_at: string }>;
      const subscribed = new Set<string>(destinations.flatMap((w) => w.topics));
      const since = Math.min(...destinations.map((w) => Date.parse(w.created_at)));
      const logOfHooks = asWebhooksGetIt(log_).filter((e) => subscribed.has(e.where.split(' ')[1]!.split('/')[0]!));
      const hooks: DeliveredEvent[] = receiver.deliveries
        .filter((d) => d.path === `/${sync.id}`)
        .map((d, i) => ({ key: d.id, value: d.body, where: `webhook #${i}` }));
      events.set(`${sync.kind}: webhook deliveries`, hooks.length);
      checked('events (webhooks)');
      violations.push(...samePath(`${sync.kind} webhooks`, logOfHooks, hooks, { since }));
      // Folded on their own too: the events logged before the destination was made (which it
      // is not owed), then its deliveries as they came; the subscribed tables must be the database's.
      const hookFold = new EventFold(`${sync.kind} webhooks`).add(logOfHooks.filter((e) => !loggedSince(e, since))).add(hooks);
      const hookTables = new Set(logOfHooks.map((e) => (JSON.parse(e.value) as { table_db_name: string }).table_db_name));
      checked('events-fold (webhooks)', hookFold.events);
      violations.push(...hookFold.violations, ...compareFold(`${sync.kind} webhooks`, hookFold, database, hookTables));
      const controlled = controls.check(sync.id, log_);
      checked('webhook controls (filter, 410 then enabled, rotation)', controlled.delivered);
      violations.push(...controlled.violations);
      if (kafka) {
        const fromKafka = await readKafkaEvents(kafka.brokers, `svc.${sync.id}.`);
        events.set(`${sync.kind}: Kafka messages`, fromKafka.length);
        checked('events (Kafka)');
        violations.push(...samePath(`${sync.kind} kafka`, log_, fromKafka));
        const kafkaFold = new EventFold(`${sync.kind} kafka`).add(fromKafka);
        checked('events-fold (Kafka)', kafkaFold.events);
        violations.push(...kafkaFold.violations, ...compareFold(`${sync.kind} kafka`, kafkaFold, database));
      }
    }
    const stats = await upstreams.stats();
    checked('health: no upstream 429');
    if (stats.stripe.rateLimited + stats.airtable.rateLimited > 0) {
      violations.push({
        check: 'health',
        detail: `the upstreams answered requests with 429: Stripe ${stats.stripe.rateLimited}, Airtable ${stats.airtable.rateLimited}`,
      });
      for (const r of stats.refusals.slice(0, 3)) violations.push({ check: 'health', detail: describeRefusal(r) });
    }
    const unexplained = service.errors.filter((line) => !faults.some((f) => line.time >= f.from && line.time <= f.to));
    checked('health: error log lines explained');
    for (const line of unexplained.slice(0, 10))
      violations.push({ check: 'health', detail: `${line.process} logged an error no fault explains: ${line.text.slice(0, 400)}` });
    memory.last = (await service.memoryKb()) ?? 0;
    memory.peak = Math.max(memory.peak, memory.last);
    checked('health: memory bounded');
    if (memory.peak > 1_000_000) violations.push({ check: 'health', detail: `a service process's memory reached ${Math.round(memory.peak / 1024)} MiB` });
    for (const actor of actors) {
      for (const [kind, n] of actor.counts.done) {
        const entry = operations.get(kind) ?? { done: 0, refused: 0 };
        entry.done += n;
        operations.set(kind, entry);
      }
      for (const [kind, n] of actor.counts.refused) {
        const entry = operations.get(kind) ?? { done: 0, refused: 0 };
        entry.refused += n;
        operations.set(kind, entry);
      }
      if ('checked' in actor) checked('read-after-write', (actor as { checked: number }).checked);
    }
    for (const reader of readers) await reader.end();
    return {
      seed: options.seed,
      minutes: options.minutes,
      operations,
      events,
      faults,
      checks,
      violations,
      memoryKb: memory,
      requests: service.requests(),
      upstreamsLoopDelayMs: stats.loopDelayMs,
      convergence,
    };
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    // SIM_KEEP=1 keeps the service's log and both PostgreSQL clusters, to look into a violation.
    if (process.env.SIM_KEEP === '1') log(`kept ${dir}`);
    else await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Those of `tasks` that have not settled `ms` after this call. */
async function stragglers<T extends { done: Promise<unknown> }>(tasks: T[], ms: number): Promise<T[]> {
  const settled = new Set<T>();
  const all = Promise.allSettled(tasks.map((task) => task.done.finally(() => settled.add(task))));
  await Promise.race([all, pause(ms)]);
  return tasks.filter((task) => !settled.has(task));
}

/** A 429 and who filled the second before it (ms before it, by user agent; the service names itself `Tributary/…`). */
function describeRefusal({ refused, before }: Refusal): string {
  const agent = (a: { agent: string }) => a.agent.split(' ')[0] || '(none)';
  const who = before.map((a) => `${a.at - refused.at} ms ${agent(a)} ${a.method} ${a.path}`).join('; ');
  return `429 at ${new Date(refused.at).toISOString()} to ${refused.method} ${refused.path} (${agent(refused)}, ${refused.key}); the second before: ${before.length} requests: ${who}`;
}

async function countRows(url: string, table: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);
  } finally {
    await client.end();
  }
}

async function readMeta(url: string): Promise<Array<{ started_at: number; completed_at: number }> | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ s: string; c: string }>(
      'SELECT extract(epoch FROM started_at) * 1000 AS s, extract(epoch FROM completed_at) * 1000 AS c FROM public._sync_meta',
    );
    return rows.map((r) => ({ started_at: Number(r.s), completed_at: Number(r.c) }));
  } finally {
    await client.end();
  }
}

/**
 * No delivery queued or being retried for any destination of the syncs. Deliveries that ran
 * out of attempts while the receiver was down are replayed, and those waiting out a back-off
 * retried now, as a user would from the console once the receiver is back.
 */
async function webhooksDrained(apiUrl: string, token: string, syncs: SyncHandle[]): Promise<boolean> {
  let drained = true;
  for (const sync of syncs) {
    const list = await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}/webhooks`);
    for (const w of list.data as Array<{ id: string }>) {
      const view = await api(apiUrl, token, 'GET', `/api/syncs/${sync.id}/webhooks/${w.id}`);
      const { pending, retrying, exhausted } = view.deliveries as { pending: number; retrying: number; exhausted: number };
      // As a user would once the destination is back: replay the exhausted ones, retry the waiting ones now.
      if (exhausted + retrying > 0) await api(apiUrl, token, 'POST', `/api/syncs/${sync.id}/webhooks/${w.id}/deliveries/replay`, {});
      if (pending + retrying + exhausted > 0) drained = false;
    }
  }
  return drained;
}
