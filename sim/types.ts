import type { Random } from './random.ts';

/** An invariant that did not hold: what, where, and the seed that reproduces the run. */
export interface Violation {
  /** The invariant, e.g. `db=upstream`, `events-fold`, `read-after-write`, `health`. */
  check: string;
  /** What differed, with the ids needed to look at it. */
  detail: string;
}

/** Counts of what an actor did, by kind of operation ("customer.create", "record.update" …). */
export class OpCounts {
  readonly done = new Map<string, number>();
  /** Operations the upstream refused (a state that no longer allowed them): not faults. */
  readonly refused = new Map<string, number>();

  ok(kind: string): void {
    this.done.set(kind, (this.done.get(kind) ?? 0) + 1);
  }

  no(kind: string): void {
    this.refused.set(kind, (this.refused.get(kind) ?? 0) + 1);
  }

  get total(): number {
    let n = 0;
    for (const v of this.done.values()) n += v;
    return n;
  }
}

/**
 * One source of traffic. `run` acts until the signal aborts, then resolves (never rejects on
 * an upstream refusal: it counts it and goes on); it must stop within a second of the abort.
 */
export interface TrafficActor {
  readonly name: string;
  readonly counts: OpCounts;
  /** What it is doing now, for a report when it does not stop. */
  readonly doing?: string;
  run(signal: AbortSignal): Promise<void>;
}

export interface ActorContext {
  random: Random;
  /** Where to say what happened (one line per notable thing; not per operation). */
  log(message: string): void;
}
