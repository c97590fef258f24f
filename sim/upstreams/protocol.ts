import type { Refusal } from '../../fakes/shared/stats.ts';
import type { LateEventsSetting } from '../../fakes/stripe/index.ts';

/** What the upstreams' process is started with. */
export interface HostSetUp {
  /** The one upstream this process plays. */
  only: 'stripe' | 'airtable';
  seed: number;
  stripeKey: string;
  airtableToken: string;
  baseId: string;
  /** The table the API clients own; the UI users leave it alone. */
  clientTable: string;
}

/** Where the upstreams listen, once started. */
export interface HostReady {
  stripeUrl: string;
  airtableUrl: string;
  stripeAccount: string;
}

/** A fault rule for the simulated account or base (the fakes' FaultRule, matched to it). */
export interface UpstreamFault {
  upstream: 'stripe' | 'airtable';
  kind: 'status' | 'hang' | 'truncate';
  status?: number;
  times: number;
}

export type HostRequest =
  | { op: 'fault'; fault: UpstreamFault }
  | { op: 'clear-faults' }
  /** Stripe's events listed late (the fake's setting); null turns it off. */
  | { op: 'late-events'; setting: LateEventsSetting | null }
  /** Whether an event about the Stripe object was listed only after `atMs`. */
  | { op: 'listed-after'; object: string; atMs: number }
  | { op: 'stats' }
  /** Changes Stripe makes with no event: `count` customers (chosen by `seed`) renamed silently; their ids. */
  | { op: 'silent-edits'; count: number; seed: number }
  | { op: 'users-start'; salt: number }
  | { op: 'users-stop' }
  /** `settings`: the sync's (GET /api/syncs/:id), for the settings that choose an Airtable column's type. */
  | { op: 'check'; kind: 'stripe' | 'airtable'; databaseUrl: string; settings?: Record<string, unknown> }
  | { op: 'close' };

export interface UpstreamStats {
  stripe: { requests: number; rateLimited: number };
  airtable: { requests: number; rateLimited: number };
  /** Each 429 with the requests that filled its window (who overran the limit). */
  refusals: Refusal[];
  /** The upstreams' event-loop delay over the run (how late they may have counted an arrival). */
  loopDelayMs: { p99: number; max: number };
}

export interface UserCounts {
  done: Array<[string, number]>;
  refused: Array<[string, number]>;
}
