import { pause } from '../src/time.ts';

/**
 * At most `perSecond` requests in any sliding second (plus a margin, since the upstream counts
 * arrival times): how an actor keeps to its share of an upstream's limit. Actors that share
 * one share share one pacer.
 */
export class Pacer {
  private readonly sent: number[] = [];

  constructor(
    readonly perSecond: number,
    private readonly marginMs = 60,
  ) {}

  async take(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const now = Date.now();
      while (this.sent.length > 0 && this.sent[0]! <= now - 1000 - this.marginMs) this.sent.shift();
      if (this.sent.length < this.perSecond) {
        this.sent.push(now);
        return;
      }
      await pause(this.sent[0]! + 1000 + this.marginMs - now + 1, signal);
      signal?.throwIfAborted();
    }
  }
}
