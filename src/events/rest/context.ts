import type pg from 'pg';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import type { EventLogReader } from '../log.ts';
import type { GroupStore } from './groups.ts';
import type { TopicAccess } from './topics.ts';

/** Tunables of the event REST interface; production uses the defaults. */
export interface RestLimits {
  /** Largest request body taken (413 beyond). */
  maxBodyBytes: number;
  /** Long polls (`timeout`, milliseconds) are cut to this. */
  maxTimeoutMs: number;
  /** `timeout` when the request names none (Upstash's default). */
  defaultTimeoutMs: number;
  /** Messages per answer, and a soft cap on their total size (at least one is always sent). */
  maxMessages: number;
  maxResponseBytes: number;
  /** `topicPartitionOffsets`, commit and committed lists longer than this are refused. */
  maxPartitionsPerRequest: number;
  /** How long a checked event password stays cached (as a digest, never in clear). */
  credentialCacheMs: number;
  /** When an instance that stops consuming loses its partitions (`Kafka-Session-Timeout-Ms`). */
  defaultSessionTimeoutMs: number;
  minSessionTimeoutMs: number;
  maxSessionTimeoutMs: number;
  /** A waiting consume looks again at least this often, so that partitions freed meanwhile move to it. */
  pollSliceMs: number;
  /** Topics one consumer instance may name (each one of the account's own). */
  maxTopicsPerMember: number;
  /** How often instances past their session timeout, and groups idle past the retention, are removed. */
  groupSweepMs: number;
  /** A group with no instance goes, committed offsets and all, after this long without a consume or commit. */
  groupRetentionMs: number;
  /** Long polls (`/consume`, `/fetch`) one account may have open at once in this process; 429 past it. */
  maxLongPollsPerAccount: number;
}

export const DEFAULT_LIMITS: RestLimits = {
  maxBodyBytes: 64 * 1024,
  maxTimeoutMs: 30_000,
  defaultTimeoutMs: 1_000,
  maxMessages: 1_000,
  maxResponseBytes: 4 * 1024 * 1024,
  maxPartitionsPerRequest: 1_000,
  credentialCacheMs: 60_000,
  defaultSessionTimeoutMs: 120_000,
  minSessionTimeoutMs: 1_000,
  maxSessionTimeoutMs: 600_000,
  pollSliceMs: 2_000,
  maxTopicsPerMember: 100,
  groupSweepMs: 60_000,
  groupRetentionMs: 7 * 86_400_000,
  maxLongPollsPerAccount: 50,
};

export interface RestContext {
  pool: pg.Pool;
  reader: EventLogReader;
  bus: EventBus;
  logger: Logger;
  limits: RestLimits;
  topics: TopicAccess;
  groups: GroupStore;
}

/** Who is asking, and when to give up (the client went away, or the server is closing). */
export interface RequestScope {
  accountId: string;
  signal: AbortSignal;
}
