import type { AirtableTunables } from './airtable/kind.ts';
import type { RestLimits } from './events/rest/context.ts';
import type { WebhookDelivererOptions } from './events/webhooks/deliverer.ts';
import type { RetrySchedule } from './events/webhooks/schedule.ts';
import type { StripeTunables } from './stripe/kind.ts';
import type { BackfillTuning } from './backfill/runner.ts';
import type { StatusBounds } from './control/status.ts';

/** Knobs tests turn to make time pass faster; production uses the defaults. */
export interface Tunables {
  airtable?: AirtableTunables;
  stripe?: StripeTunables;
  workerTickMs?: number;
  decoder?: { flushMs?: number; maxBatch?: number; retryMs?: number; lagReportMs?: number; lagRewriteMs?: number; leaseMs?: number; silenceMs?: number };
  backfills?: Partial<BackfillTuning>;
  webhooks?: { schedule?: Partial<RetrySchedule>; tuning?: WebhookDelivererOptions['tuning'] };
  /** The event REST interface's limits (consumer-group sweeps, session timeouts). */
  eventsRest?: Partial<RestLimits>;
  proxy?: { writeThroughPatienceMs?: number };
  /** How long a stable attachment link hands out an upstream URL it read (default an hour). */
  attachmentUrlTtlMs?: number;
  /** How often a running sync puts its reader role back as provisioned. */
  readerCheckMs?: number;
  /** A sync's statement against its database unanswered this long fails (default 5 min). */
  syncDbQueryTimeoutMs?: number;
  /** A sync runner silent this long is restarted (default 15 min, sync/runners.ts). */
  syncStuckMs?: number;
  /** The status rule's bounds: a part behind turns yellow, red, and how fresh a decoder report must be. */
  status?: Partial<StatusBounds>;
  /** A control-database statement unanswered this long fails (default 30 s); LISTEN connections' heartbeat (default 10 s). */
  controlDb?: { queryTimeoutMs?: number; heartbeatMs?: number };
}

/**
 * Tunables from the environment: the time scale of benchmarks that run the service as a child
 * process, the operator's share of an Airtable user's quota for syncs, and how long a paced
 * Airtable cycle takes (0: never paced), how often a Stripe sync tries again the lists its
 * key could not read, how far back its feed reads again for events listed late (0: not), and
 * how often its audit starts a round (0: never).
 */
export function tunablesFromEnv(env: NodeJS.ProcessEnv): Tunables {
  const scale = Number(env.TRIBUTARY_BENCH_TIME_SCALE || 1);
  const share = env.TRIBUTARY_AIRTABLE_USER_SYNC_SHARE;
  if (share !== undefined && share !== '' && !(/^\d+$/.test(share) && Number(share) >= 1 && Number(share) <= 50)) {
    throw new Error(
      `TRIBUTARY_AIRTABLE_USER_SYNC_SHARE: expected a whole number from 1 to 50 (of the user's 50 requests a second), got ${JSON.stringify(share)}`,
    );
  }
  const paced = env.TRIBUTARY_AIRTABLE_PACED_CYCLE_S;
  if (paced !== undefined && paced !== '' && !(/^\d+$/.test(paced) && Number(paced) <= 86_400)) {
    throw new Error(`TRIBUTARY_AIRTABLE_PACED_CYCLE_S: expected a whole number of seconds from 0 (never paced) to 86400, got ${JSON.stringify(paced)}`);
  }
  const airtable = {
    ...(scale === 1 ? {} : { timeScale: scale }),
    ...(share ? { userSyncShare: Number(share) } : {}),
    ...(paced ? { pacedCycleMs: Number(paced) * 1000 } : {}),
  };
  const recheck = env.TRIBUTARY_STRIPE_RECHECK_S;
  if (recheck !== undefined && recheck !== '' && !(/^\d+$/.test(recheck) && Number(recheck) >= 10 && Number(recheck) <= 86_400)) {
    throw new Error(`TRIBUTARY_STRIPE_RECHECK_S: expected a whole number of seconds from 10 to 86400, got ${JSON.stringify(recheck)}`);
  }
  const late = env.TRIBUTARY_STRIPE_LATE_WINDOW_S;
  if (late !== undefined && late !== '' && !(/^\d+$/.test(late) && Number(late) <= 3600)) {
    throw new Error(`TRIBUTARY_STRIPE_LATE_WINDOW_S: expected a whole number of seconds from 0 (off) to 3600, got ${JSON.stringify(late)}`);
  }
  const audit = env.TRIBUTARY_STRIPE_AUDIT_EVERY_S;
  if (audit !== undefined && audit !== '' && !(/^\d+$/.test(audit) && Number(audit) <= 86_400)) {
    throw new Error(`TRIBUTARY_STRIPE_AUDIT_EVERY_S: expected a whole number of seconds from 0 (off) to 86400, got ${JSON.stringify(audit)}`);
  }
  const silence = env.TRIBUTARY_DECODER_SILENCE_S;
  if (silence !== undefined && silence !== '' && !(/^\d+$/.test(silence) && Number(silence) >= 5 && Number(silence) <= 3600)) {
    throw new Error(`TRIBUTARY_DECODER_SILENCE_S: expected a whole number of seconds from 5 to 3600, got ${JSON.stringify(silence)}`);
  }
  const deadline = env.TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S;
  if (deadline !== undefined && deadline !== '' && !(/^\d+$/.test(deadline) && Number(deadline) >= 10 && Number(deadline) <= 86_400)) {
    throw new Error(`TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S: expected a whole number of seconds from 10 to 86400, got ${JSON.stringify(deadline)}`);
  }
  const stripe = {
    ...(recheck ? { recheckSkippedMs: Number(recheck) * 1000 } : {}),
    ...(late ? { lateEvents: { windowS: Number(late) } } : {}),
    ...(audit ? { audit: { everyMs: Number(audit) * 1000 } } : {}),
  };
  return {
    ...(Object.keys(airtable).length === 0 ? {} : { airtable }),
    ...(Object.keys(stripe).length === 0 ? {} : { stripe }),
    ...(silence ? { decoder: { silenceMs: Number(silence) * 1000 } } : {}),
    ...(deadline ? { syncDbQueryTimeoutMs: Number(deadline) * 1000 } : {}),
  };
}
