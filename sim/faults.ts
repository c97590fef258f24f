import { CONTROL_DB_QUERY_TIMEOUT_MS } from '../src/control/control-pool.ts';
import { REPLICATION_SILENCE_MS } from '../src/decoder/replication.ts';
import { pause } from '../src/time.ts';
import type { KafkaBroker } from '../test/harness/kafka/types.ts';
import type { Random } from './random.ts';
import type { CrashablePostgres } from '../test/harness/crashable-postgres.ts';
import { dropSlot } from '../src/db/slots.ts';
import { withClient } from '../src/db/sql.ts';
import type { ThreadRelay } from './relay-thread.ts';
import type { Upstreams } from './upstreams/remote.ts';
import type { ServiceFleet, WebhookReceiver } from './world.ts';

/** What a fault can strike. */
export interface FaultTargets {
  service: ServiceFleet;
  control: CrashablePostgres;
  /** The service's path to the control database, which can hang. */
  controlPath: ThreadRelay;
  /** The sync databases' servers, one per region; a crash takes them in turn. */
  targets: CrashablePostgres[];
  /** The service's paths to them, in the same order, which can hang. */
  targetPaths: ThreadRelay[];
  /** Target crashes so far. */
  targetCrashes: number;
  /** Target path hangs so far. */
  targetHangs: number;
  /** Target failovers so far. */
  failovers: number;
  /** The service's paths to each upstream (not the customers' own clients'), which can hang or slow. */
  upstreamPaths: Record<'stripe' | 'airtable', ThreadRelay>;
  kafka?: KafkaBroker;
  /** The service's path to the broker, which can hang. */
  kafkaPath?: ThreadRelay;
  receiver: WebhookReceiver;
  upstreams: Upstreams;
}

/** A fault that struck, and the time during which the service may log errors because of it. */
export interface StruckFault {
  kind: FaultKind;
  /** The kind, and what it struck where it chose (a process, a server). */
  name: string;
  from: number;
  to: number;
}

export const FAULT_KINDS = [
  'upstream-500',
  'upstream-timeout',
  'upstream-truncated',
  'airtable-429-lockout',
  'stripe-429-storm',
  'service-sigkill',
  'target-db-crash',
  'control-db-crash',
  'control-db-hang',
  'target-db-hang',
  'upstream-hang',
  'upstream-slow',
  'kafka-restart',
  'kafka-hang',
  'webhook-receiver-down',
  'stripe-late-events',
  'stripe-silent-edits',
  'slot-lost',
  'failover',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * The hung and slow paths to the sync servers, the upstreams and Kafka strike in soaks and
 * with `--only`, not yet in the CI profile: each passes alone there (with the SIGKILL), but
 * with every kind, seed 5150 left both sync runners of one worker silent after the last fault
 * in two of four runs, the cause not found yet (docs/testing.md).
 */
export const PATH_FAULTS: readonly FaultKind[] = ['target-db-hang', 'upstream-hang', 'upstream-slow', 'kafka-hang'];
export const CI_FAULT_KINDS: readonly FaultKind[] = FAULT_KINDS.filter((kind) => !PATH_FAULTS.includes(kind));

/**
 * Faults under which a sync's feed may stand still until they are over, grace included: no
 * upstream request goes out without a grant from the control database, none is applied
 * without the sync database and the process that reads it, and failed requests back off.
 * (A late event's change arrives within a bound only outside them: traffic/clients.ts.)
 */
export const HOLDS_THE_FEEDS: readonly FaultKind[] = [
  'upstream-500',
  'upstream-timeout',
  'upstream-truncated',
  'upstream-hang',
  'upstream-slow',
  'stripe-429-storm',
  'service-sigkill',
  'target-db-crash',
  'target-db-hang',
  'control-db-crash',
  'control-db-hang',
  'failover',
];

/** Errors the service logs while recovering from a fault are explained this long after it ends. */
const GRACE_MS = 30_000;
/** The simulation's operator sets this deadline on sync statements (TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S). */
export const SIM_SYNC_DB_QUERY_TIMEOUT_MS = 30_000;
/** A Kafka request unanswered this long fails, and its connection with it (the clients' default, 30 s), with a reconnect's back-off. */
const KAFKA_REQUEST_TIMEOUT_MS = 60_000;
/** A request to an upstream unanswered this long fails: the longest, the proxy's response timeout (a sync's own is 30 s). */
const UPSTREAM_REQUEST_TIMEOUT_MS = 80_000;

/**
 * Strikes one fault and waits until it is over (the struck part is back). `scale` shortens
 * the long ones (a receiver down for minutes in a soak, seconds in CI).
 */
export async function strike(kind: FaultKind, t: FaultTargets, random: Random, scale: number, signal: AbortSignal): Promise<StruckFault> {
  const from = Date.now();
  let name: string = kind;
  let grace = GRACE_MS;
  const upstream = random.chance(0.5) ? 'stripe' : 'airtable';
  const addFault = (rule: { kind: 'status' | 'hang' | 'truncate'; status?: number; times: number }) => t.upstreams.addFault({ upstream, ...rule });
  switch (kind) {
    case 'upstream-500':
      await addFault({ kind: 'status', status: random.pick([500, 502, 503]), times: random.between(2, 8) });
      await pause(5000, signal);
      break;
    case 'upstream-timeout':
      await addFault({ kind: 'hang', times: random.between(1, 3) });
      await pause(45_000 * Math.min(1, scale * 2), signal);
      break;
    case 'upstream-truncated':
      await addFault({ kind: 'truncate', times: random.between(1, 4) });
      await pause(5000, signal);
      break;
    case 'airtable-429-lockout':
      // Airtable answers 429 for 30 s once a base goes over its limit.
      await t.upstreams.addFault({ upstream: 'airtable', kind: 'status', status: 429, times: Infinity });
      await pause(30_000, signal);
      await t.upstreams.clearFaults();
      break;
    case 'stripe-429-storm':
      await t.upstreams.addFault({ upstream: 'stripe', kind: 'status', status: 429, times: random.between(10, 40) });
      await pause(5000, signal);
      break;
    case 'service-sigkill':
      // One process of the fleet, started again as a supervisor would.
      name = `${kind} (${await t.service.killOne(random, random.between(200, 3000), signal)})`;
      break;
    case 'target-db-crash':
    case 'control-db-crash': {
      const server = kind === 'target-db-crash' ? t.targets[t.targetCrashes++ % t.targets.length]! : t.control;
      if (kind === 'target-db-crash') name = `${kind} (${server.name})`;
      await server.crash();
      await pause(random.between(1000, 5000), signal);
      await server.start();
      break;
    }
    case 'control-db-hang':
      // The path stops passing bytes without closing: statements, connects and LISTEN
      // heartbeats must fail on their own deadlines. Connections caught in it stay dead.
      await t.controlPath.hang();
      await pause(random.between(3000, 20_000), signal);
      await t.controlPath.heal();
      // A pooled connection caught in it fails at its next use, up to its deadline later.
      grace += CONTROL_DB_QUERY_TIMEOUT_MS;
      break;
    case 'target-db-hang': {
      // The path to one sync databases' server stops passing bytes: the decoder's session (its
      // silence bound), the syncs' pooled connections and the proxy's and the wait's statements
      // (their deadlines) must each notice on their own; new connections fail at the connect
      // deadline until it heals.
      const i = t.targetHangs++ % t.targetPaths.length;
      name = `${kind} (${t.targets[i]!.name})`;
      await t.targetPaths[i]!.hang();
      await pause(random.between(3000, 3000 + 17_000 * Math.min(1, scale * 5)), signal);
      await t.targetPaths[i]!.heal();
      grace += SIM_SYNC_DB_QUERY_TIMEOUT_MS + REPLICATION_SILENCE_MS;
      break;
    }
    case 'upstream-hang':
      // The service's own path to an upstream stops passing bytes: each request in flight, and
      // each made meanwhile, must fail at its timeout; the next after the heal goes through.
      name = `${kind} (${upstream})`;
      await t.upstreamPaths[upstream].hang();
      await pause(random.between(3000, 3000 + 17_000 * Math.min(1, scale * 5)), signal);
      await t.upstreamPaths[upstream].heal();
      grace += UPSTREAM_REQUEST_TIMEOUT_MS;
      break;
    case 'upstream-slow':
      // A congested or far-away path: every chunk waits a latency with jitter, both ways.
      name = `${kind} (${upstream})`;
      await t.upstreamPaths[upstream].slow(random.between(100, 600), random.between(50, 400));
      await pause(Math.max(15_000, 60_000 * scale), signal);
      await t.upstreamPaths[upstream].fast();
      break;
    case 'kafka-hang':
      // The service's path to the broker stops passing bytes: the relay's produce requests and
      // the admin's must fail at their timeouts and reconnect once it heals, losing nothing.
      await t.kafkaPath?.hang();
      await pause(random.between(3000, 3000 + 17_000 * Math.min(1, scale * 5)), signal);
      await t.kafkaPath?.heal();
      grace += KAFKA_REQUEST_TIMEOUT_MS;
      break;
    case 'kafka-restart':
      if (t.kafka) await t.kafka.restart();
      break;
    case 'stripe-late-events':
      // Stripe's events list is eventually consistent: for a while, a share of the events is
      // listed seconds late, behind newer ones (within the feed's one-minute window).
      await t.upstreams.stripeLateEvents({ share: 0.3, delayMs: random.between(2000, 10_000), seed: random.int(1_000_000) });
      await pause(Math.max(20_000, 120_000 * scale), signal);
      await t.upstreams.stripeLateEvents(null);
      break;
    case 'stripe-silent-edits': {
      // Changes Stripe makes with no event (a field it never announces): only the audit finds
      // them, and the final db=upstream check holds only once it has (docs/stripe.md#the-audit).
      const edited = await t.upstreams.stripeSilentEdits(random.between(2, 5), random.int(1_000_000));
      name = `${kind} (${edited.length} customers)`;
      await pause(5000, signal);
      break;
    }
    case 'slot-lost': {
      // An operator drops a sync database's replication slot under its running decoder (as an
      // invalidated one is lost): the service must make a new one, mark the gap and read the
      // tables again (docs/events.md#gaps-a-lost-replication-slot).
      const server = random.pick(t.targets);
      name = `${kind} (${(await dropOneSlot(server, random, signal)) ?? 'none found'} on ${server.name})`;
      await pause(5000, signal);
      break;
    }
    case 'failover': {
      // One sync server fails over to a standby made of it: its syncs' slots were failover
      // slots, synced to the standby, so the decoders go on from them; a slot not synced in
      // time is lost with the old primary, and its gap is marked (docs/operations.md).
      const server = t.targets[t.failovers++ % t.targets.length]!;
      const unsynced = await server.failover(60_000 * Math.min(1, scale * 2), signal);
      name = `${kind} (${server.name}${unsynced.length > 0 ? `; ${unsynced.length} slots not synced in time, their gaps marked` : ''})`;
      await pause(5000, signal);
      grace += REPLICATION_SILENCE_MS;
      break;
    }
    case 'webhook-receiver-down':
      t.receiver.mode = 'down';
      await pause(180_000 * scale, signal);
      t.receiver.mode = 'flapping';
      await pause(60_000 * scale, signal);
      t.receiver.mode = 'up';
      break;
  }
  return { name, kind, from, to: Date.now() + grace };
}

/** Ends whatever a fault left behind (injected rules, a receiver down), for the quiet phase. */
export async function clearFaults(t: FaultTargets): Promise<void> {
  t.receiver.mode = 'up';
  await t.controlPath.heal();
  for (const path of [...t.targetPaths, ...Object.values(t.upstreamPaths), ...(t.kafkaPath ? [t.kafkaPath] : [])]) {
    await path.heal();
    await path.fast();
  }
  await t.upstreams.clearFaults();
}

/** Drops one sync database's slot on `server`, ending its WAL sender first (its decoder may come back between: tried again). */
async function dropOneSlot(server: CrashablePostgres, random: Random, signal: AbortSignal): Promise<string | undefined> {
  return withClient(server.adminUrl, async (db) => {
    const { rows } = await db.query<{ slot_name: string }>("SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'logical' ORDER BY slot_name");
    if (rows.length === 0) return undefined;
    const slot = random.pick(rows).slot_name;
    try {
      await dropSlot(db, slot, signal);
      return slot;
    } catch {
      return `${slot} (not dropped: always in use)`;
    }
  });
}
