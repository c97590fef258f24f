import type { AttemptResult } from './attempts.ts';

/**
 * When a destination is disabled, judged from its attempts: at once when it answers 410 Gone
 * (it asks to be sent nothing more), or once every attempt has failed for `disableAfterMs`.
 * The failing run survives restarts: the worker saves it with its cursor.
 */
export class DestinationHealth {
  private since: number | undefined;

  constructor(
    failingSince: Date | null,
    private readonly disableAfterMs: number,
  ) {
    this.since = failingSince?.getTime();
  }

  /** Since when every attempt has failed; null after a success. */
  get failingSince(): Date | null {
    return this.since === undefined ? null : new Date(this.since);
  }

  /** Takes an attempt's outcome; answers why the destination is to be disabled, if it is. */
  record(result: AttemptResult): string | undefined {
    if (result.ok) {
      this.since = undefined;
      return undefined;
    }
    const at = result.at.getTime();
    this.since ??= at;
    if (result.gone) return 'it answered 410 Gone';
    if (at - this.since >= this.disableAfterMs) return `every attempt has failed since ${new Date(this.since).toISOString()}`;
    return undefined;
  }
}
