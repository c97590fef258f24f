import { CONTROL_DB_QUERY_TIMEOUT_MS } from '../src/control/control-pool.ts';
import { pause } from '../src/time.ts';
import type { KafkaBroker } from '../test/harness/kafka/types.ts';
import type { Random } from './random.ts';
import type { CrashablePostgres } from '../test/harness/crashable-postgres.ts';
import type { TcpRelay } from './tcp-relay.ts';
import type { Upstreams } from './upstreams/remote.ts';
import type { ServiceFleet, WebhookReceiver } from './world.ts';

/** What a fault can strike. */
export interface FaultTargets {
  service: ServiceFleet;
  control: CrashablePostgres;
  /** The service's path to the control database, which can hang. */
  controlPath: TcpRelay;
  /** The sync databases' servers, one per region; a crash takes them in turn. */
  targets: CrashablePostgres[];
  /** Target crashes so far. */
  targetCrashes: number;
  kafka?: KafkaBroker;
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
  'kafka-restart',
  'webhook-receiver-down',
  'stripe-late-events',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Errors the service logs while recovering from a fault are explained this long after it ends. */
const GRACE_MS = 30_000;

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
      t.controlPath.hang();
      await pause(random.between(3000, 20_000), signal);
      t.controlPath.heal();
      // A pooled connection caught in it fails at its next use, up to its deadline later.
      grace += CONTROL_DB_QUERY_TIMEOUT_MS;
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
  t.controlPath.heal();
  await t.upstreams.clearFaults();
}
