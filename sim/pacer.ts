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

  /**
   * Waits for a slot and takes it. Call the function it returns when the request's answer
   * has come: the slot then counts from that moment. A request reaches the upstream some time
   * after it is sent (through the proxy, after its quota), but always before its answer, so
   * counted from the answer it can never be closer to the next than the upstream sees it.
   */
  async take(signal?: AbortSignal): Promise<() => void> {
    for (;;) {
      const now = Date.now();
      while (this.sent.length > 0 && this.sent[0]! <= now - 1000 - this.marginMs) this.sent.shift();
      if (this.sent.length < this.perSecond) {
        const slot = { at: now };
        this.sent.push(now);
        return () => {
          const i = this.sent.indexOf(slot.at);
          if (i >= 0) this.sent.splice(i, 1);
          const answered = Date.now();
          // Kept in order: the front is always the oldest.
          let at = this.sent.length;
          while (at > 0 && this.sent[at - 1]! > answered) at--;
          this.sent.splice(at, 0, answered);
        };
      }
      await pause(this.sent[0]! + 1000 + this.marginMs - now + 1, signal);
      signal?.throwIfAborted();
    }
  }
}
