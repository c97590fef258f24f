import { pause } from '../time.ts';

/** While a paced request waits, whether it still may wait is asked this often. */
const PACE_CHECK_MS = 5000;

/**
 * A sweep's pace. While change capture is healthy and the last cycle found nothing it had
 * missed, the next cycle spreads its requests over `cycleMs` (the previous cycle's count of
 * requests sets the gap); otherwise, and as soon as that stops being true mid-cycle, it goes
 * at the full pace the quota allows. A base too large to sweep within `cycleMs` at full pace
 * is never slowed. The cycle is still always under way: it is spread out, not paused.
 */
export class SweepPacer {
  private next = 0;
  private made = 0;

  constructor(
    private readonly options: {
      /** Target duration of a paced cycle; 0: never paced. */
      cycleMs: number;
      /** Requests the previous cycle made (pages and the schema read). */
      expectedRequests: number;
      /** Whether the pace may be slow now (checked before every request, and while waiting). */
      paced: () => Promise<boolean>;
      signal: AbortSignal;
    },
  ) {}

  /** Waits for the next request's turn; counts it. The wait ends early once the pace may not be slow. */
  async turn(): Promise<void> {
    this.made++;
    const gap = this.options.cycleMs / Math.max(1, this.options.expectedRequests);
    while (this.options.cycleMs > 0 && !this.options.signal.aborted && (await this.options.paced())) {
      const now = Date.now();
      if (this.next <= now) {
        this.next = now + gap;
        return;
      }
      await pause(Math.min(this.next - now, PACE_CHECK_MS), this.options.signal);
    }
    this.next = 0;
  }

  /** Requests made so far in this cycle. */
  get requests(): number {
    return this.made;
  }
}

/**
 * The pace of a runner's cycles, one after another: whether the next may be paced (the one
 * before found nothing change capture had missed, with capture healthy from its start to
 * its end, and nothing urgent came up in it), its pacer, and the status's word on it when that
 * changes. Once a cycle finds what capture missed, the rest of it goes at the full pace.
 */
export class CyclePace {
  private current: SweepPacer | undefined;
  /** Requests the latest completed cycle made. */
  private expected = 0;
  private foundNothing = false;
  private clean = false;
  /** Something urgent came up during this cycle (it then went at the full pace). */
  private urgentSeen = false;
  private reported: number | null | undefined;

  constructor(
    private readonly options: {
      cycleMs: number;
      /** Change capture is working now. */
      healthy: () => boolean;
      /** Something only a full cycle can catch is pending (a schema change, a waiter's pass, new settings). */
      urgent: () => boolean | Promise<boolean>;
      report: (pacedSeconds: number | null) => Promise<void>;
      signal: AbortSignal;
    },
  ) {}

  /** At a cycle's start, before its first request. */
  async begin(): Promise<void> {
    const { cycleMs, healthy, urgent, signal } = this.options;
    const provenBefore = this.foundNothing && this.expected > 0 && cycleMs > 0;
    this.urgentSeen = false;
    // A cycle that finds something capture missed (or must rebuild a table for new settings)
    // finishes at the full pace: its user is waiting for that, not for the next cycle.
    const paced = async () => {
      if (!provenBefore || this.urgentSeen || !this.clean || !healthy()) return false;
      this.urgentSeen = await urgent();
      return !this.urgentSeen;
    };
    this.current = new SweepPacer({ cycleMs, expectedRequests: this.expected, paced, signal });
    this.foundNothing = false;
    this.clean = healthy();
    const seconds = (await paced()) ? Math.round(cycleMs / 1000) : null;
    if (seconds !== this.reported) {
      await this.options.report(seconds);
      this.reported = seconds;
    }
  }

  /** Waits for the cycle's next request. */
  turn(): Promise<void> {
    return this.current?.turn() ?? Promise.resolve();
  }

  /** The cycle found something change capture had not written (or rebuilt a table). */
  missed(): void {
    this.clean = false;
  }

  /** At a cycle's successful end. */
  end(): void {
    // What was urgent (new settings, a schema change) is served by the next cycle, at the full pace.
    this.foundNothing = this.clean && !this.urgentSeen && this.options.healthy();
    this.expected = this.current?.requests ?? 0;
  }
}
