import type { DeliveryBehind } from './delivery-lag.ts';
import type { IncompleteList, SlotGap, SlotRetention, SyncStatusFields } from './status-fields.ts';

export type Indicator = 'normal' | 'yellow' | 'red';

export interface SyncStatus {
  indicator: Indicator;
  reason: string;
  started_at: string | null;
  completed_at: string | null;
  duration_last: number | null;
  lag_seconds: number | null;
  last_error: string | null;
  progress: unknown;
  slowed_by: string | null;
  paced_cycle_s: number | null;
  incomplete: IncompleteList[];
  events_lag_seconds: number | null;
  deliveries_lag_seconds: number | null;
  deliveries_behind: string | null;
}

/** How long a sync may keep failing before yellow turns red. */
export const RED_AFTER_MS = 5 * 60_000;
/** A cycle running this much longer than usual is "slower than usual". */
export const SLOW_FACTOR = 1.5;
/** How long a sync's note that a shared limit slows it is shown after the runner last said so. */
export const SLOWED_SHOWN_MS = 60_000;

/** Events this far behind the database turn the indicator yellow; past RED_AFTER_MS, red. */
export const EVENTS_BEHIND_YELLOW_MS = 2 * 60_000;
/**
 * A report this recent, with the log caught up at it, means caught up now: the decoder
 * rewrites an unchanged report only once a minute (decoder/lag.ts), every few seconds
 * otherwise.
 */
const REPORT_FRESH_MS = 90_000;
/**
 * The bounds of the indicator rule. Tests shorten them (Tunables.status) to see a part go
 * yellow and red in seconds; the service uses the defaults.
 */
export interface StatusBounds {
  /** A part this far behind (the event log, a delivery path) turns yellow. */
  behindYellowMs: number;
  /** Failing, or behind, this long turns red. */
  redAfterMs: number;
  /** A decoder report this recent, with the log caught up at it, means caught up now. */
  reportFreshMs: number;
  /** A replication slot keeping this share of what its server lets it keep turns yellow. */
  slotYellowShare: number;
}

/** Half of max_slot_wal_keep_size: time to bring a decoder back before its slot is lost. */
export const SLOT_YELLOW_SHARE = 0.5;

export const DEFAULT_STATUS_BOUNDS: StatusBounds = {
  behindYellowMs: EVENTS_BEHIND_YELLOW_MS,
  redAfterMs: RED_AFTER_MS,
  reportFreshMs: REPORT_FRESH_MS,
  slotYellowShare: SLOT_YELLOW_SHARE,
};

/** The log reaching to within this of its report's time counts as caught up at the report. */
const CAUGHT_UP_MS = 30_000;
/** Bytes of WAL behind that still count as caught up (the report's own step). */
const CAUGHT_UP_BYTES = 1024 * 1024;

/**
 * How far behind the database the event log is, in seconds: the age of the oldest committed
 * change that may not be an event yet. 0 while the decoder's latest report found the log
 * caught up and is recent; else the time since the log's reach (`logged_through`), which a
 * stopped or stuck decoder leaves behind. Null before the decoder's first report.
 */
export function eventsLagSeconds(status: SyncStatusFields, now: Date, bounds = DEFAULT_STATUS_BOUNDS): number | null {
  const events = status.events;
  if (!events?.reportedAt || !events.loggedThrough) return null;
  const reported = events.reportedAt.getTime();
  const through = events.loggedThrough.getTime();
  const caughtUp = now.getTime() - reported <= bounds.reportFreshMs && reported - through <= CAUGHT_UP_MS && (events.slotLagBytes ?? 0) < CAUGHT_UP_BYTES;
  if (caughtUp) return 0;
  return Math.max(0, Math.round((now.getTime() - through) / 1000));
}

/** The event log's share of the indicator: yellow past behindYellowMs behind, red past redAfterMs. */
function eventsIndicator(status: SyncStatusFields, now: Date, bounds: StatusBounds): Indicator {
  return behindIndicator(eventsLagSeconds(status, now, bounds), bounds);
}

/**
 * How far behind the event log the delivery path furthest behind is, in seconds: the age of
 * the oldest logged event it has not delivered yet; 0 when every path has delivered
 * everything; null when not known (not read, or no decoder report yet).
 */
export function deliveriesLagSeconds(status: SyncStatusFields, now: Date): number | null {
  if (status.deliveries === undefined) return null;
  if (status.deliveries === null) return 0;
  return Math.max(0, Math.round((now.getTime() - status.deliveries.since.getTime()) / 1000));
}

/** The same bounds as the event log's: a path behind two minutes is yellow, five red. */
function deliveriesIndicator(status: SyncStatusFields, now: Date, bounds: StatusBounds): Indicator {
  return behindIndicator(deliveriesLagSeconds(status, now), bounds);
}

/**
 * The share of its server's bound (max_slot_wal_keep_size) the slot keeps: what it keeps over
 * that plus what may still be written before WAL it needs is dropped. Null without a bound.
 */
export function slotShare(slot: SlotRetention | null | undefined): number | null {
  if (!slot || slot.retainedBytes === null || slot.safeBytes === null) return null;
  const bound = slot.retainedBytes + Math.max(0, slot.safeBytes);
  return bound > 0 ? Math.min(1, slot.retainedBytes / bound) : null;
}

/** A lost slot's gap colours the status for at most this long after it, however its re-read ended. */
const GAP_SHOWN_MS = 24 * 3_600_000;

/** The sync's latest gap while it is not made whole: no new slot yet, or its re-read not done. */
function openGap(status: SyncStatusFields, now: Date): SlotGap | undefined {
  const gap = status.slotGap;
  if (!gap || gap.backfillState === 'done' || now.getTime() - gap.lostAt.getTime() > GAP_SHOWN_MS) return undefined;
  return gap;
}

/**
 * The slot's share of the indicator: red once PostgreSQL has dropped WAL it needed (`lost`)
 * or the slot is gone, until a new one is made; yellow while the tables are read again after
 * it (slot-recovery.ts), or when the next checkpoint may drop WAL (`unreserved`), or past
 * slotYellowShare of the bound.
 */
function slotIndicator(status: SyncStatusFields, now: Date, bounds: StatusBounds): Indicator {
  const gap = openGap(status, now);
  if (gap) return gap.recoveredAt ? 'yellow' : 'red';
  const slot = status.events?.slot;
  if (slot?.walStatus === 'lost') return 'red';
  if (slot?.walStatus === 'unreserved') return 'yellow';
  const share = slotShare(slot);
  return share !== null && share >= bounds.slotYellowShare ? 'yellow' : 'normal';
}

function slotReason(status: SyncStatusFields, now: Date): string {
  const gap = openGap(status, now);
  if (gap) {
    const at = gap.lostAt.toISOString().replace('T', ' ').slice(0, 19);
    if (!gap.recoveredAt) return `replication slot lost at ${at} UTC (${gap.detail}); making a new one`;
    const reread =
      gap.backfillState === 'failed' || gap.backfillState === 'canceled'
        ? `the re-read of every collection (backfill ${gap.backfillId}) was ${gap.backfillState}: ask for a backfill to make the events whole`
        : `a new slot streams, and every collection is being read again into the events (backfill ${gap.backfillId}); a gap marker in the stream says where the reads replace what consumers hold`;
    return `replication slot lost at ${at} UTC (${gap.detail}): ${reread}`;
  }
  const slot = status.events!.slot!;
  if (slot.walStatus === 'lost')
    return "replication slot lost: PostgreSQL dropped WAL it still needed (past the server's max_slot_wal_keep_size), so changes since are missing from the events";
  const mb = Math.round((slot.retainedBytes ?? 0) / (1024 * 1024));
  const share = slotShare(slot);
  const of = share === null ? '' : `, ${Math.round(share * 100)} % of what the server lets it keep (max_slot_wal_keep_size)`;
  const next = slot.walStatus === 'unreserved' ? 'the next checkpoint may drop WAL it needs' : 'past the bound PostgreSQL drops WAL it needs';
  return `replication slot holding ${mb} MB of WAL${of}: the decoder is down or behind; ${next}`;
}

function behindIndicator(lag: number | null, bounds: StatusBounds): Indicator {
  if (lag === null || lag * 1000 < bounds.behindYellowMs) return 'normal';
  return lag * 1000 >= bounds.redAfterMs ? 'red' : 'yellow';
}

const RANK: Record<Indicator, number> = { normal: 0, yellow: 1, red: 2 };

/** The parts of the path, each with its own share of the indicator; the worst decides. */
type Part = 'sync' | 'events' | 'deliveries' | 'slot';

function parts(status: SyncStatusFields, now: Date, bounds: StatusBounds): Record<Part, Indicator> {
  return {
    sync: syncIndicator(status, now, bounds),
    events: eventsIndicator(status, now, bounds),
    deliveries: deliveriesIndicator(status, now, bounds),
    slot: slotIndicator(status, now, bounds),
  };
}

/**
 * The part that decides the indicator: the worst; of two as bad, the later on the path (its
 * reason is the more precise: a sync failing now while its log is two minutes behind), and
 * the slot's before all (its WAL is a danger to every database of its server).
 */
function decidingPart(status: SyncStatusFields, now: Date, bounds: StatusBounds): { part: Part; indicator: Indicator } {
  const of = parts(status, now, bounds);
  // A key rejected, a base gone or a full disk is what the user must fix first, whatever lags behind it.
  if (fatal(status) || diskFull(status)) return { part: 'sync', indicator: 'red' };
  let worst: Part = 'sync';
  for (const part of ['events', 'deliveries', 'slot'] as const) if (of[part] !== 'normal' && RANK[of[part]] >= RANK[of[worst]]) worst = part;
  return { part: worst, indicator: of[worst] };
}

/**
 * The indicator rule, the worst of the sync's own part, its event log's and its deliveries':
 * - red: the key was rejected or the base is gone (fatal: at once), or the database's server
 *   is out of disk space (at once: nothing is written), or failing for five
 *   minutes or more with no completed cycle since; or the event log is five minutes or more
 *   behind the database; or a delivery path (the Kafka relay, an enabled webhook) is five
 *   minutes or more behind the event log;
 * - yellow: the latest attempt failed for less than five minutes, or the running cycle
 *   has taken more than 1.5x its usual duration, or the event log is two minutes or more
 *   behind the database (a decoder stopped, stuck or not reporting), or a delivery path
 *   two minutes or more behind the log (a relay stuck, a receiver failing), or the sync's
 *   replication slot keeps half or more of the WAL its server lets it keep, or its tables are
 *   being read again after a lost slot was replaced;
 * - red too: the slot lost WAL it needed, or is gone, until a new one is made;
 * - normal: otherwise.
 */
export function indicatorOf(status: SyncStatusFields, now: Date, bounds = DEFAULT_STATUS_BOUNDS): Indicator {
  return decidingPart(status, now, bounds).indicator;
}

/** The latest attempt failed for good (a key rejected, a base gone), with no completed cycle since. */
function fatal(status: SyncStatusFields): boolean {
  const lastGood = status.completedAt?.getTime() ?? 0;
  return status.lastErrorKind === 'fatal' && !!status.lastError && !!status.lastErrorAt && status.lastErrorAt.getTime() > lastGood;
}

/** The latest attempt failed because the database's server is out of disk space, with no completed cycle since. */
function diskFull(status: SyncStatusFields): boolean {
  const lastGood = status.completedAt?.getTime() ?? 0;
  return status.lastErrorKind === 'disk_full' && !!status.lastError && !!status.lastErrorAt && status.lastErrorAt.getTime() > lastGood;
}

function syncIndicator(status: SyncStatusFields, now: Date, bounds: StatusBounds): Indicator {
  const lastGood = status.completedAt?.getTime() ?? 0;
  // Nothing is written until space is freed: every change upstream is now missing here.
  if (fatal(status) || diskFull(status)) return 'red';
  if (status.lastError && status.lastErrorAt && status.lastErrorAt.getTime() > lastGood) {
    const failingSince = Math.max(lastGood, status.startedAt?.getTime() ?? status.lastErrorAt.getTime());
    return now.getTime() - failingSince >= bounds.redAfterMs ? 'red' : 'yellow';
  }
  const running = status.startedAt && status.startedAt.getTime() > lastGood;
  if (running && status.durationUsualSeconds) {
    const elapsed = (now.getTime() - status.startedAt!.getTime()) / 1000;
    // A paced cycle is meant to take its time: it is slow only past its own target.
    const usual = Math.max(status.durationUsualSeconds, status.pacedCycleSeconds ?? 0);
    if (elapsed > SLOW_FACTOR * usual + 5) return 'yellow';
  }
  return 'normal';
}

/** Why the indicator is what it is, in words for the console's hover text. */
export function indicatorReason(status: SyncStatusFields, now: Date, bounds = DEFAULT_STATUS_BOUNDS): string {
  const { part, indicator } = decidingPart(status, now, bounds);
  if (part === 'slot') return slotReason(status, now);
  if (part === 'deliveries') return deliveriesReason(status.deliveries!, indicator, deliveriesLagSeconds(status, now)!);
  if (part === 'events') {
    const behind = eventsLagSeconds(status, now, bounds)!;
    // Stale by the same measure as the lag's (exact, not the rounded seconds shown): a report
    // 9.4 s old against a 9 s bound counts the log as behind, and the reason must say why.
    const age = status.events?.reportedAt ? now.getTime() - status.events.reportedAt.getTime() : null;
    const stale = age !== null && age > bounds.reportFreshMs ? `, and the decoder last reported ${Math.round(age / 1000)} s ago` : '';
    return `events ${indicator === 'red' ? 'stopped' : 'behind'}: changes of the last ${behind} s may not be events yet${stale}`;
  }
  if (indicator === 'normal' && !status.completedAt) return 'first sync under way: the database is not complete yet';
  if (indicator === 'normal') return slowedBy(status, now) ? 'syncing, slowed by an upstream limit' : 'syncing as usual';
  if (status.lastError && status.lastErrorKind === 'fatal') return `stopped: ${status.lastError}`;
  if (diskFull(status))
    return `the sync database's server is out of disk space (${status.lastError}): nothing can be written until space is freed; the sync tries again and catches up by itself`;
  if (status.lastError && status.lastErrorAt && status.lastErrorAt.getTime() > (status.completedAt?.getTime() ?? 0)) {
    return `${indicator === 'red' ? `failing for ${spoken(bounds.redAfterMs)} or more` : 'trouble syncing'}: ${status.lastError}`;
  }
  return 'this sync is taking longer than usual';
}

/** A delivery path behind: which, how far, and its receiver's latest failure where there is one. */
function deliveriesReason(behind: DeliveryBehind, indicator: Indicator, lag: number): string {
  const what = behind.path === 'kafka' ? 'the Kafka relay' : behind.path;
  const failing = behind.lastError ? `; its latest attempt failed: ${behind.lastError}` : behind.failingSince ? '; every attempt fails' : '';
  return `deliveries ${indicator === 'red' ? 'stopped' : 'behind'}: ${what} has not delivered the events of the last ${lag} s${failing}`;
}

/**
 * Lag is the age of the oldest change the database may still miss, by whichever path brings
 * changes: the time since the latest pass known complete began (a read of the Stripe feed or
 * of Airtable's change capture, recorded every few seconds), or since the last completed cycle
 * began (its completion time minus its duration), whichever is later.
 */
function lagSeconds(status: SyncStatusFields, now: Date): number | null {
  if (!status.completedAt) return null;
  const cycleBegan = status.completedAt.getTime() - (status.durationLastSeconds ?? 0) * 1000;
  const began = Math.max(cycleBegan, status.confirmedThrough?.getTime() ?? 0);
  return Math.max(0, Math.round((now.getTime() - began) / 100) / 10);
}

/**
 * An upstream limit that held the sync back lately, as the runner said: one it shares with
 * other syncs (Airtable: the user's 50 requests a second across bases), or a 429 from the
 * upstream (most often other clients' requests beside the sync's).
 */
function slowedBy(status: SyncStatusFields, now: Date): string | null {
  if (!status.slowedBy || !status.slowedAt || now.getTime() - status.slowedAt.getTime() > SLOWED_SHOWN_MS) return null;
  return status.slowedBy;
}

/** A bound in words: "5 minutes", or seconds where it is not whole minutes (a test's). */
function spoken(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} minute${ms === 60_000 ? '' : 's'}` : `${Math.round(ms / 1000)} s`;
}

/** `bounds`: the defaults, with whatever a test shortened (Tunables.status). */
export function statusOf(status: SyncStatusFields, now = new Date(), shortened?: Partial<StatusBounds>): SyncStatus {
  const bounds = shortened ? { ...DEFAULT_STATUS_BOUNDS, ...shortened } : DEFAULT_STATUS_BOUNDS;
  return {
    indicator: indicatorOf(status, now, bounds),
    reason: indicatorReason(status, now, bounds),
    started_at: status.startedAt?.toISOString() ?? null,
    completed_at: status.completedAt?.toISOString() ?? null,
    duration_last: status.durationLastSeconds,
    lag_seconds: lagSeconds(status, now),
    last_error: status.lastError,
    progress: status.progress ?? null,
    slowed_by: slowedBy(status, now),
    paced_cycle_s: status.pacedCycleSeconds ?? null,
    incomplete: status.incomplete ?? [],
    events_lag_seconds: eventsLagSeconds(status, now, bounds),
    deliveries_lag_seconds: deliveriesLagSeconds(status, now),
    deliveries_behind: status.deliveries ? status.deliveries.path : null,
  };
}
