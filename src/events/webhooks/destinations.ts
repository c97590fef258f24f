import type pg from 'pg';
import type { Secret, SecretBox } from '../../control/secrets.ts';
import { inTransaction } from '../../db/sql.ts';
import { TributaryError } from '../../errors.ts';
import { randomLowerAlnum } from '../../ids.ts';
import { EVENTS_CHANNEL } from '../bus.ts';
import type { Signing } from './attempts.ts';
import type { WebhookFilter } from './filter.ts';
import { newWebhookSecret } from './signature.ts';

export interface WebhookDestination {
  id: string;
  syncId: string;
  accountId: string;
  url: string;
  topics: string[];
  createdAt: Date;
  cursorSeq: string;
  cursorAt: Date | null;
  replayGeneration: string;
  deliveredCount: string;
  failedAttempts: string;
  lastDeliveredAt: Date | null;
  lastFailedAt: Date | null;
  /** Exhausted deliveries dropped, oldest first, past the cap on them. */
  droppedCount: string;
  filter: WebhookFilter | null;
  maxPerSecond: number | null;
  secretVersion: string;
  /** Until when deliveries are also signed with the secret a rotation replaced. */
  previousSecretUntil: Date | null;
  disabledAt: Date | null;
  disabledReason: string | null;
  /** Since when every attempt has failed; null after any success. */
  failingSince: Date | null;
  cursorGeneration: string;
}

export interface DestinationRow {
  id: string;
  sync_id: string;
  account_id: string;
  url: string;
  topics: string[];
  created_at: Date;
  cursor_seq: string;
  cursor_at: Date | null;
  replay_generation: string;
  delivered_count: string;
  failed_attempts: string;
  last_delivered_at: Date | null;
  last_failed_at: Date | null;
  dropped_count: string;
  filter: WebhookFilter | null;
  max_per_second: number | null;
  secret_version: string;
  previous_secret_until: Date | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
  failing_since: Date | null;
  cursor_generation: string;
}

export const COLUMNS = `id, sync_id, account_id, url, topics, created_at, cursor_seq, cursor_at, replay_generation,
  delivered_count, failed_attempts, last_delivered_at, last_failed_at, dropped_count, filter, max_per_second,
  secret_version, previous_secret_until, disabled_at, disabled_reason, failing_since, cursor_generation`;

export const toDestination = (row: DestinationRow): WebhookDestination => ({
  id: row.id,
  syncId: row.sync_id,
  accountId: row.account_id,
  url: row.url,
  topics: row.topics,
  createdAt: row.created_at,
  cursorSeq: row.cursor_seq,
  cursorAt: row.cursor_at,
  replayGeneration: row.replay_generation,
  deliveredCount: row.delivered_count,
  failedAttempts: row.failed_attempts,
  lastDeliveredAt: row.last_delivered_at,
  lastFailedAt: row.last_failed_at,
  droppedCount: row.dropped_count,
  filter: row.filter,
  maxPerSecond: row.max_per_second,
  secretVersion: row.secret_version,
  previousSecretUntil: row.previous_secret_until,
  disabledAt: row.disabled_at,
  disabledReason: row.disabled_reason,
  failingSince: row.failing_since,
  cursorGeneration: row.cursor_generation,
});

export const secretAad = (id: string) => `webhook_destinations:${id}:secret`;
/** Its own associated data: a current secret copied into the previous column (or back) does not unseal. */
export const previousSecretAad = (id: string) => `webhook_destinations:${id}:previous_secret`;

/** Advisory-lock class of webhook creation ('wh'), keyed by account. */
const LOCK_CLASS = 0x7768;

export const newDestinationId = () => `wh_${randomLowerAlnum(16)}`;

/**
 * Tells the sync's deliverer (in whichever process) that its destinations or queued
 * deliveries changed. It rides on the event bus's channel: a wakeup is only a hint, and
 * every reader re-reads what it needs.
 */
export async function wakeDeliverer(pool: pg.Pool, syncId: string): Promise<void> {
  await pool.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, syncId]);
}

/** Webhook destinations in the control database; the secret is kept sealed. */
export class WebhookStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly box: SecretBox,
  ) {}

  /**
   * Creates a destination that receives the events logged from now on. A 409 when the sync
   * already has `max` of them, or the account its max_webhooks. The secret is returned here only.
   */
  async create(input: {
    syncId: string;
    accountId: string;
    url: string;
    topics: string[];
    max: number;
    filter?: WebhookFilter | null;
    maxPerSecond?: number | null;
  }): Promise<{
    destination: WebhookDestination;
    secret: Secret;
  }> {
    const id = newDestinationId();
    const secret = newWebhookSecret();
    const made = await inTransaction(this.pool, async (client) => {
      // One create of the account at a time, so that concurrent ones cannot all pass the counts.
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, input.accountId]);
      const { rows: counts } = await client.query<{ sync: number; account: number; max: number }>(
        `SELECT (SELECT count(*) FROM webhook_destinations WHERE sync_id = $1)::int AS sync,
                (SELECT count(*) FROM webhook_destinations WHERE account_id = $2)::int AS account,
                (SELECT max_webhooks FROM accounts WHERE id = $2) AS max`,
        [input.syncId, input.accountId],
      );
      const count = counts[0]!;
      if (count.sync >= input.max) throw new TributaryError('conflict', `a sync can have at most ${input.max} webhooks; delete one first`);
      if (count.account >= count.max) {
        throw new TributaryError(
          'conflict',
          `this account has reached its limit of ${count.max} webhooks; delete one first (the operator can raise the limit)`,
        );
      }
      const { rows } = await client.query<DestinationRow>(
        `INSERT INTO webhook_destinations (id, sync_id, account_id, url, topics, secret_enc, filter, max_per_second, cursor_seq)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE((SELECT seq FROM decoder_progress WHERE sync_id = $2), 0))
         RETURNING ${COLUMNS}`,
        [
          id,
          input.syncId,
          input.accountId,
          input.url,
          input.topics,
          this.box.encrypt(secret.reveal(), secretAad(id)),
          input.filter ? JSON.stringify(input.filter) : null,
          input.maxPerSecond ?? null,
        ],
      );
      return toDestination(rows[0]!);
    });
    await wakeDeliverer(this.pool, input.syncId);
    return { destination: made, secret };
  }

  async list(syncId: string): Promise<WebhookDestination[]> {
    const { rows } = await this.pool.query<DestinationRow>(`SELECT ${COLUMNS} FROM webhook_destinations WHERE sync_id = $1 ORDER BY created_at, id`, [syncId]);
    return rows.map(toDestination);
  }

  async get(syncId: string, id: string): Promise<WebhookDestination | undefined> {
    const { rows } = await this.pool.query<DestinationRow>(`SELECT ${COLUMNS} FROM webhook_destinations WHERE sync_id = $1 AND id = $2`, [syncId, id]);
    return rows[0] && toDestination(rows[0]);
  }

  /** Deletes a destination and its delivery log; its deliverer stops at its next look. */
  async remove(syncId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM webhook_destinations WHERE sync_id = $1 AND id = $2', [syncId, id]);
    if (!rowCount) return false;
    await wakeDeliverer(this.pool, syncId);
    return true;
  }

  /**
   * A sync's destinations with their sealed secrets, for the deliverer. `signing` unseals the
   * secret, and the one a rotation replaced while it is still valid.
   */
  async forDeliverer(syncId: string): Promise<Array<WebhookDestination & { signing: () => Signing }>> {
    const { rows } = await this.pool.query<DestinationRow & { secret_enc: string; previous_secret_enc: string | null }>(
      `SELECT ${COLUMNS}, secret_enc, previous_secret_enc FROM webhook_destinations WHERE sync_id = $1`,
      [syncId],
    );
    return rows.map((row) => ({
      ...toDestination(row),
      signing: () => {
        const secret = this.box.decrypt(row.secret_enc, secretAad(row.id));
        const until = row.previous_secret_until;
        if (!row.previous_secret_enc || !until || until.getTime() <= Date.now()) return { secret };
        return { secret, previous: { secret: this.box.decrypt(row.previous_secret_enc, previousSecretAad(row.id)), untilMs: until.getTime() } };
      },
    }));
  }

  /**
   * Saves the cursor, the failing run and adds to the counters: one statement per destination
   * and flush, whatever the number of events. The cursor never moves back here; and a worker
   * started before the cursor was moved back (recover: a newer generation) saves neither it
   * nor its failing run, only its counts.
   */
  async saveProgress(progress: {
    id: string;
    generation: string;
    cursorSeq: string;
    delivered: number;
    failedAttempts: number;
    failingSince: Date | null;
  }): Promise<void> {
    const { id, generation, cursorSeq, delivered, failedAttempts, failingSince } = progress;
    await this.pool.query(
      `UPDATE webhook_destinations
          SET cursor_seq = CASE WHEN cursor_generation = $6 THEN GREATEST(cursor_seq, $2::bigint) ELSE cursor_seq END,
              cursor_at = now(),
              failing_since = CASE WHEN cursor_generation = $6 THEN $5::timestamptz ELSE failing_since END,
              delivered_count = delivered_count + $3, failed_attempts = failed_attempts + $4,
              last_delivered_at = CASE WHEN $3 > 0 THEN now() ELSE last_delivered_at END,
              last_failed_at = CASE WHEN $4 > 0 THEN now() ELSE last_failed_at END
        WHERE id = $1`,
      [id, cursorSeq, delivered, failedAttempts, failingSince, generation],
    );
  }
}
