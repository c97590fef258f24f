import { Notifier } from './wait.ts';

/** How often a destination answering again may cut short the back-off of its waiting lanes. */
const ANSWERED_AGAIN_GAP_MS = 5_000;

/**
 * What ends a lane's back-off early: the destination answering 2xx again (at most once per
 * ANSWERED_AGAIN_GAP_MS, so a flapping destination is not sent every waiting lane per
 * success), or a replay someone asked for. A lane notes both counts before it acts (the
 * answers when its attempt begins, the replays before it reads its queue), waits on
 * `notifier`, and compares: a 2xx that came while its own attempt was failing still counts.
 */
export class BackoffWakeups {
  readonly notifier = new Notifier();
  answeredAgain = 0;
  retryRequests = 0;
  private lastAnsweredAgainAt = 0;

  /** A 2xx from the destination. */
  answered(): void {
    const now = Date.now();
    if (now - this.lastAnsweredAgainAt < ANSWERED_AGAIN_GAP_MS) return;
    this.lastAnsweredAgainAt = now;
    this.answeredAgain += 1;
    this.notifier.notify();
  }

  /**
   * Waits up to `ms` for a wake-up the lane has not seen yet (none if one came already), and
   * says which came; the lane has seen it from then on.
   */
  async waitOut(lane: { answersSeen: number; retriesSeen: number }, ms: number): Promise<'answered' | 'retry' | undefined> {
    if (this.answeredAgain === lane.answersSeen && this.retryRequests === lane.retriesSeen) await this.notifier.wait(ms);
    if (this.answeredAgain !== lane.answersSeen) {
      lane.answersSeen = this.answeredAgain;
      return 'answered';
    }
    if (this.retryRequests === lane.retriesSeen) return undefined;
    lane.retriesSeen = this.retryRequests;
    return 'retry';
  }

  /** Replays were requested: lanes waiting out a back-off look again at when to try. */
  retryRequested(): void {
    this.retryRequests += 1;
    this.notifier.notify();
  }
}
