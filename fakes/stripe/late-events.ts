/**
 * Stripe's events list is eventually consistent (UPSTREAMS.md): an event can be listed only
 * some time after it was made, in its place by `created`, behind newer events already listed.
 * A reader that only asks for what comes after the last id it saw skips such an event for good.
 * Off by default; `share` of the events made while it is on are late, each by a delay drawn
 * from (minDelayMs, delayMs], both decided by a seeded hash of the event's number so a run repeats.
 */
import { hash } from '../shared/hash.ts';
import type { Clock } from './clock.ts';

export interface LateEventsSetting {
  /** The share of events made late, 0–1. */
  share: number;
  /** The longest delay before a late event is listed. */
  delayMs: number;
  /** The shortest (default 0): a test that reads the list within it is sure the event is not there yet. */
  minDelayMs?: number;
  seed?: number;
}

/** One event made late: its id, the object it is about, when it was made and when listed. */
export interface LateEvent {
  id: string;
  object: string;
  madeAtMs: number;
  visibleAtMs: number;
}

export class LateEvents {
  private setting: LateEventsSetting | undefined;
  private readonly hiddenUntil = new Map<string, number>();
  private count = 0;
  /** Every event made late so far, with when it was listed (undefined while it is not). */
  readonly log: LateEvent[] = [];

  constructor(private readonly clock: Clock) {}

  /** Turns it on (or changes it), or off with undefined; events already late stay late. */
  set(setting: LateEventsSetting | undefined): void {
    const min = setting?.minDelayMs ?? 0;
    if (setting && !(setting.share >= 0 && setting.share <= 1 && setting.delayMs > 0 && min >= 0 && min <= setting.delayMs)) {
      throw new Error(`late events: share must be 0–1, delayMs above 0 and minDelayMs from 0 to delayMs, not ${JSON.stringify(setting)}`);
    }
    this.setting = setting;
  }

  /** Called for each event as it is made: decides whether it is late, and until when. */
  onEvent(id: string, object: string): void {
    const setting = this.setting;
    this.count++;
    if (!setting || setting.share === 0) return;
    const seed = setting.seed ?? 1;
    if (hash(seed, this.count, 1) / 4294967296 >= setting.share) return;
    const min = setting.minDelayMs ?? 0;
    const delay = Math.max(1, min + Math.ceil((hash(seed, this.count, 2) / 4294967296) * (setting.delayMs - min)));
    const now = this.clock.nowMs();
    this.hiddenUntil.set(id, now + delay);
    this.log.push({ id, object, madeAtMs: now, visibleAtMs: now + delay });
  }

  /** Whether the list (and a retrieval by id) shows the event yet. */
  visible(id: string): boolean {
    const until = this.hiddenUntil.get(id);
    if (until === undefined) return true;
    if (this.clock.nowMs() < until) return false;
    this.hiddenUntil.delete(id);
    return true;
  }

  /** Whether an event about the object was listed only after `atMs` (a reader could not see it then). */
  listedAfter(object: string, atMs: number): boolean {
    for (let i = this.log.length - 1; i >= 0; i--) {
      const entry = this.log[i]!;
      if (entry.object === object && entry.visibleAtMs > atMs) return true;
    }
    return false;
  }

  /** Late events not listed yet. */
  get pending(): number {
    for (const id of [...this.hiddenUntil.keys()]) this.visible(id);
    return this.hiddenUntil.size;
  }
}
