import type pg from 'pg';
import type { Secret, SecretBox } from '../../control/secrets.ts';
import { inTransaction } from '../../db/sql.ts';
import { COLUMNS, type DestinationRow, previousSecretAad, secretAad, toDestination, wakeDeliverer, type WebhookDestination } from './destinations.ts';
import type { WebhookFilter } from './filter.ts';
import { newWebhookSecret } from './signature.ts';

/** What PATCH changes; a field left out stays as it is (null removes a filter or a rate). */
export interface DestinationPatch {
  url?: string;
  topics?: string[];
  filter?: WebhookFilter | null;
  maxPerSecond?: number | null;
  enabled?: boolean;
}

export const DISABLED_BY_REQUEST = 'disabled by request';

/**
 * What a webhook's owner (and its deliverer, for disabling) changes on a destination after
 * creation. Each change wakes the sync's deliverer, which compares what it runs with the row
 * and updates or restarts the destination's worker (deliverer.ts reconcile).
 */
export class DestinationControls {
  constructor(
    private readonly pool: pg.Pool,
    private readonly box: SecretBox,
  ) {}

  /**
   * Re-enabling clears the failing run, so the days-long failure count starts afresh; the
   * cursor stays where it stopped, so delivery resumes from there.
   */
  async update(syncId: string, id: string, patch: DestinationPatch): Promise<WebhookDestination | undefined> {
    const has = (key: keyof DestinationPatch) => patch[key] !== undefined;
    const { rows } = await this.pool.query<DestinationRow>(
      `UPDATE webhook_destinations
          SET url = COALESCE($3, url), topics = COALESCE($4, topics),
              filter = CASE WHEN $5 THEN $6::jsonb ELSE filter END,
              max_per_second = CASE WHEN $7 THEN $8::int ELSE max_per_second END,
              disabled_at = CASE WHEN $9::boolean IS NULL THEN disabled_at WHEN $9 THEN NULL ELSE COALESCE(disabled_at, now()) END,
              disabled_reason = CASE WHEN $9::boolean IS NULL THEN disabled_reason WHEN $9 THEN NULL ELSE COALESCE(disabled_reason, $10) END,
              failing_since = CASE WHEN $9 AND disabled_at IS NOT NULL THEN NULL ELSE failing_since END
        WHERE sync_id = $1 AND id = $2
        RETURNING ${COLUMNS}`,
      [
        syncId,
        id,
        patch.url ?? null,
        patch.topics ?? null,
        has('filter'),
        patch.filter ? JSON.stringify(patch.filter) : null,
        has('maxPerSecond'),
        patch.maxPerSecond ?? null,
        patch.enabled ?? null,
        DISABLED_BY_REQUEST,
      ],
    );
    if (!rows[0]) return undefined;
    await wakeDeliverer(this.pool, syncId);
    return toDestination(rows[0]);
  }

  /**
   * A new secret; the old one is kept, sealed, and signs beside it for `previousForMs` (0: not
   * at all). Only the latest replaced secret is kept. Undefined when there is no such webhook.
   */
  async rotateSecret(syncId: string, id: string, previousForMs: number): Promise<{ secret: Secret; previousUntil: Date | null } | undefined> {
    const secret = newWebhookSecret();
    const rotated = await inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ secret_enc: string }>('SELECT secret_enc FROM webhook_destinations WHERE sync_id = $1 AND id = $2 FOR UPDATE', [
        syncId,
        id,
      ]);
      if (!rows[0]) return undefined;
      const previous = previousForMs > 0 ? this.box.encrypt(this.box.decrypt(rows[0].secret_enc, secretAad(id)).reveal(), previousSecretAad(id)) : null;
      const { rows: updated } = await client.query<{ until: Date | null }>(
        `UPDATE webhook_destinations
            SET secret_enc = $2, previous_secret_enc = $3,
                previous_secret_until = CASE WHEN $3::text IS NULL THEN NULL ELSE now() + make_interval(secs => $4) END,
                secret_version = secret_version + 1
          WHERE id = $1
          RETURNING previous_secret_until AS until`,
        [id, this.box.encrypt(secret.reveal(), secretAad(id)), previous, previousForMs / 1000],
      );
      return { secret, previousUntil: updated[0]!.until };
    });
    if (rotated) await wakeDeliverer(this.pool, syncId);
    return rotated;
  }

  /**
   * Moves the cursor back to just before the first event logged at or after `since` (never
   * forward), enables the destination, and drops its delivery rows of the events it will
   * send again (they are all in the log: `since` is within its retention). The generation
   * bump makes a running worker stop saving its cursor and parking rows, and the deliverer
   * restart it from here. Undefined when there is no such webhook.
   */
  async recover(syncId: string, id: string, since: Date): Promise<{ fromSeq: string } | undefined> {
    const recovered = await inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ cursor_seq: string }>('SELECT cursor_seq FROM webhook_destinations WHERE sync_id = $1 AND id = $2 FOR UPDATE', [
        syncId,
        id,
      ]);
      if (!rows[0]) return undefined;
      // Partitions before `since` are pruned; within its day the sync's events are walked in seq order.
      const { rows: found } = await client.query<{ before: string }>(
        `SELECT COALESCE((SELECT seq - 1 FROM events WHERE sync_id = $1 AND created_at >= $2 ORDER BY seq LIMIT 1),
                         (SELECT seq FROM decoder_progress WHERE sync_id = $1), 0) AS before`,
        [syncId, since],
      );
      const before = BigInt(found[0]!.before);
      const cursor = BigInt(rows[0].cursor_seq);
      const from = before < cursor ? before : cursor;
      await client.query(
        `UPDATE webhook_destinations
            SET cursor_seq = $2, cursor_at = now(), cursor_generation = cursor_generation + 1,
                recovered_at = CASE WHEN $2::bigint < cursor_seq THEN now() ELSE recovered_at END,
                disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
          WHERE id = $1`,
        [id, from.toString()],
      );
      await client.query('DELETE FROM webhook_deliveries WHERE destination_id = $1 AND seq > $2', [id, before.toString()]);
      // Lanes start again from the moved-back cursor, but for those further behind still.
      await client.query('DELETE FROM webhook_lanes WHERE destination_id = $1 AND (released OR after_seq >= $2)', [id, from.toString()]);
      return { fromSeq: (from + 1n).toString() };
    });
    if (recovered) await wakeDeliverer(this.pool, syncId);
    return recovered;
  }

  /**
   * Disables a destination that asked to be sent nothing more, or that has failed for days.
   * Its sync's recent errors (the console's) say so, so that its owner sees it; the deliverer
   * stops its worker. False when it was disabled already.
   */
  async disable(syncId: string, id: string, reason: string): Promise<boolean> {
    const message = `webhook ${id} disabled: ${reason}. Nothing is sent to it until it is enabled again (PATCH {"enabled":true}); it then resumes where it stopped.`;
    const { rows } = await this.pool.query<{ id: string }>(
      `WITH disabled AS (
         UPDATE webhook_destinations SET disabled_at = now(), disabled_reason = $3
          WHERE sync_id = $1 AND id = $2 AND disabled_at IS NULL RETURNING id),
       pruned AS (
         DELETE FROM sync_errors WHERE sync_id = $1 AND at < now() - interval '1 day' AND EXISTS (SELECT 1 FROM disabled)),
       noted AS (
         INSERT INTO sync_errors (sync_id, kind, message) SELECT $1, 'fatal', $4 FROM disabled)
       SELECT id FROM disabled`,
      [syncId, id, reason, message.slice(0, 1000)],
    );
    if (rows.length === 0) return false;
    await wakeDeliverer(this.pool, syncId);
    return true;
  }
}
