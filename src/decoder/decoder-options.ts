import type pg from 'pg';
import type { NewEvent } from '../events/append.ts';
import type { IdlePools } from '../db/idle-pools.ts';
import type { EventBus } from '../events/bus.ts';
import type { Logger } from '../log.ts';
import type { CollectionRules, TableInfo } from './events.ts';
import type { DecoderMember, Member } from './members.ts';

export interface DecoderOptions {
  /** The sync that made the database (schema `public`); its database's slot is `slot`. */
  syncId: string;
  accountId: string;
  /** Every active sync whose tables are in the database, that one among them; absent: it alone. */
  members?: () => Promise<DecoderMember[]>;
  /** Told the ids of the syncs it serves, at each session's start and when they change. */
  onMembers?: (syncIds: string[]) => void;
  /** Admin URL of the sync database: the replication connection needs the REPLICATION right. */
  databaseUrl: string;
  slot: string;
  control: pg.Pool;
  bus?: EventBus;
  rules: CollectionRules;
  logger: Logger;
  /** Largest batch logged in one transaction; reaching it also holds the stream back. */
  maxBatch?: number;
  /** How long committed changes may wait for more before they are logged. */
  flushMs?: number;
  /** Pause before reconnecting after the stream or the control database failed. */
  retryMs?: number;
  /** A replication session silent this long, a ping unanswered, is a hung path: failed and started again (default 30 s). */
  silenceMs?: number;
  /** How often the slot's lag is read (and written to decoder_progress when it changed). */
  lagReportMs?: number;
  /** An unchanged lag is written again after this long (default a minute), so the status knows the decoder still reports. */
  lagRewriteMs?: number;
  /** Where the connection that reads the slot's lag is kept; without it, a new one each time. */
  pools?: IdlePools;
  partitions?: number;
  now?: () => Date;
  /** Whether the sync is still active: a stream that fails once its delete began is routine. */
  active?: () => Promise<boolean>;
}

export interface OpenTransaction {
  commitLsn: string;
  /** As a bigint, against each member's loggedCommit: a replay's changes already in the log are skipped. */
  commit: bigint;
  position: number;
  events: Array<[Member, NewEvent]>;
  /** When its events were made: one time for all the events of a transaction. */
  createdAt?: { at: Date; text: string };
  /** Column lists of a swapped-in table and its sync, set by the swap's first message. */
  swap?: { next: TableInfo; prior: TableInfo; member: Member };
}
