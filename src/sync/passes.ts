import type pg from 'pg';
import { notFound } from '../errors.ts';
import { pause } from '../time.ts';

/**
 * Sync passes and the wait endpoint. A pass is a unit of sync work that
 * reads upstream after it starts and leaves the sync database holding everything upstream
 * had at its start (what counts as one is up to each runner). Its start is taken from the
 * control database's clock; so is a waiter's arrival, so the two compare across machines.
 *
 * A waiter stamps `syncs.pass_wanted_at` and NOTIFYs PASS_WANTED_CHANNEL (runners may start
 * a pass early). A runner whose pass started after a wanted stamp writes
 * `syncs.confirmed_through` when the pass completes and NOTIFYs PASSES_CHANNEL.
 */
export const PASS_WANTED_CHANNEL = 'tributary_pass_wanted';
export const PASSES_CHANNEL = 'tributary_passes';
/**
 * The upstream says a sync has news (a signed notification, src/api/routes/hooks.ts): its
 * runner reads sooner. No stamp, no pass: only a hint, as a wait request's NOTIFY is.
 */
export const PING_CHANNEL = 'tributary_ping';

/**
 * Wakes the sync's runner, in whichever process runs it; `part` names what has news, where
 * the kind can tell (a Stripe connected account), so the runner reads only that.
 */
export async function pingRunner(control: pg.Pool, syncId: string, part?: string): Promise<void> {
  await control.query(`SELECT pg_notify('${PING_CHANNEL}', $1)`, [part ? `${syncId} ${part}` : syncId]);
}

/**
 * Wakes the sync's runner for a signed notification seen for the first time by any API process
 * (`key` names the delivery); false when it was taken already (a replay). Keys are kept for
 * `windowMs`, past the signature's own tolerance.
 */
export async function pingRunnerOnce(control: pg.Pool, syncId: string, key: string, windowMs: number, part?: string): Promise<boolean> {
  const { rowCount } = await control.query(
    `WITH pruned AS (DELETE FROM hook_replays WHERE seen_at < now() - $3 * interval '1 millisecond'),
          taken AS (INSERT INTO hook_replays (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING 1)
     SELECT pg_notify('${PING_CHANNEL}', $2) FROM taken`,
    [key, part ? `${syncId} ${part}` : syncId, windowMs],
  );
  return rowCount === 1;
}

/** Where a pass began: the control database's clock (ISO 8601, microseconds), and whether a waiter wants it. */
export interface PassStart {
  at: string;
  wanted: boolean;
}

/** A timestamptz as ISO 8601 text in UTC, which round-trips whatever the session's DateStyle. */
const isoUtc = (expression: string) => `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** Called by a runner before it reads anything upstream for a pass. */
export async function passStarted(control: pg.Pool, syncId: string): Promise<PassStart> {
  const { rows } = await control.query<PassStart>(
    `SELECT ${isoUtc('clock_timestamp()')} AS at,
            COALESCE((SELECT pass_wanted_at > COALESCE(confirmed_through, '-infinity') FROM syncs WHERE id = $1), false) AS wanted`,
    [syncId],
  );
  return rows[0]!;
}

/** Records a completed pass (only moves forward) and, when someone waits for it, wakes the waiters. */
export async function confirmPass(control: pg.Pool, syncId: string, pass: PassStart): Promise<void> {
  await control.query(
    `WITH c AS (UPDATE syncs SET confirmed_through = GREATEST(confirmed_through, $2::timestamptz) WHERE id = $1 RETURNING id)
     SELECT pg_notify('${PASSES_CHANNEL}', id) FROM c WHERE $3`,
    [syncId, pass.at, pass.wanted],
  );
}

/** A wait request: stamps its arrival (the control database's clock) and wakes the sync's runner. */
export async function requestPass(control: pg.Pool, syncId: string): Promise<string> {
  const { rows } = await control.query<{ arrived: string }>(
    `WITH w AS (UPDATE syncs SET pass_wanted_at = GREATEST(pass_wanted_at, clock_timestamp())
                 WHERE id = $1 AND state = 'active' RETURNING id, pass_wanted_at)
     SELECT ${isoUtc('pass_wanted_at')} AS arrived,
            pg_notify('${PASS_WANTED_CHANNEL}', id) FROM w`,
    [syncId],
  );
  if (!rows[0]) throw notFound(`sync ${syncId}`);
  return rows[0].arrived;
}

/** Wakes waiters when a sync's pass completes (PassSignals, one LISTEN per process). */
export interface PassCompletions {
  completedMark(syncId: string): number;
  completedSince(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  /** False while the LISTEN connection is down: waiters then poll. */
  readonly listening: boolean;
}

/** Wakes a runner when someone waits on its sync (PassSignals). */
export interface PassRequests {
  /** Counts wait requests and pings alike: either wakes the runner. */
  requestMark(syncId: string): number;
  /** Pings alone: a runner woken by pings only may take its time (they cost it a read each). */
  pingMark?(syncId: string): number;
  /** True once a ping arrived after `mark`; false on timeout or abort. */
  pingedSince?(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  /** The parts pings named since the last call (each once), and forgets them. */
  takePingedParts?(syncId: string): string[];
  requestedSince(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  readonly listening: boolean;
}

/** How often a waiter re-reads the control database without notifications (and, with them, as a safety net). */
const POLL_MS = 100;
const SAFETY_MS = 1000;

/**
 * Resolves true once a pass of the sync that started after `arrived` has completed, false
 * on timeout or abort. Throws not_found when the sync is deleted meanwhile.
 */
export async function waitForPass(options: {
  control: pg.Pool;
  syncId: string;
  arrived: string;
  timeoutMs: number;
  completions?: PassCompletions;
  signal?: AbortSignal;
}): Promise<boolean> {
  const { control, syncId, completions, signal } = options;
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    // Marked before reading, so a completion between the read and the wait is not missed.
    const mark = completions?.completedMark(syncId) ?? 0;
    const { rows } = await control.query<{ confirmed: boolean | null }>(
      `SELECT confirmed_through > $2::timestamptz AS confirmed FROM syncs WHERE id = $1 AND state = 'active'`,
      [syncId, options.arrived],
    );
    if (!rows[0]) throw notFound(`sync ${syncId}`);
    if (rows[0].confirmed) return true;
    const left = deadline - Date.now();
    if (left <= 0 || signal?.aborted) return false;
    if (completions?.listening) await completions.completedSince(syncId, mark, Math.min(left, SAFETY_MS), signal);
    else await pause(Math.min(left, POLL_MS), signal);
  }
}

/** A woken runner still leaves this much between the starts of two passes (quota for everything else). */
export const WOKEN_MIN_GAP_MS = 100;

/**
 * A runner's pause before its next pass: `intervalMs`, or shorter when a wait request arrived
 * after `mark` (taken before the previous pass started), though never ending sooner than
 * WOKEN_MIN_GAP_MS after `lastStart` (Date.now() when that pass started).
 */
export async function untilNextPass(options: {
  requests?: PassRequests;
  syncId: string;
  mark: number;
  intervalMs: number;
  lastStart: number;
  signal: AbortSignal;
  /** Woken by pings alone (no wait request): the gap kept from `lastStart` instead of WOKEN_MIN_GAP_MS. */
  pinged?: { mark: number; minGapMs: number };
}): Promise<void> {
  const { requests, syncId, signal, pinged } = options;
  if (!requests?.listening) return pause(options.intervalMs, signal);
  const woken = await requests.requestedSince(syncId, options.mark, options.intervalMs, signal);
  if (!woken) return;
  const bumps = requests.requestMark(syncId) - options.mark;
  const pings = pinged && requests.pingMark ? requests.pingMark(syncId) - pinged.mark : 0;
  // Every bump a ping: a wait request is not held up by the pings' gap.
  const gapMs = pinged && pings >= bumps ? pinged.minGapMs : WOKEN_MIN_GAP_MS;
  await pause(Math.max(0, options.lastStart + gapMs - Date.now()), signal);
}
