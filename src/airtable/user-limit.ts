import type pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';

export interface UserLimitWatchOptions {
  control: pg.Pool;
  syncId: string;
  logger: Logger;
  /** How often the sync says whether it is slowed (default 15 s). */
  periodMs?: number;
  /** The syncs' share of the user's 50 a second. */
  share: number;
}

/** Requests that waited for the user's quota: at least this many, and this share of the period's. */
const MIN_HELD = 3;
const MIN_HELD_SHARE = 0.1;

/**
 * Whether the sync is slowed by its token's user's quota (Airtable: 50 requests a second for
 * all of one user's tokens together): every period, how many of the sync's requests had to
 * wait for it. When enough did, the sync's `slowed_by` says so in words (the API's status and
 * the console show it for a minute); when none do any more, it is cleared. At most one write
 * to the control database a period, and only while slowed or on the way out of it.
 */
export class UserLimitWatch {
  private requests = 0;
  private held = 0;
  private since = Date.now();
  private noted = false;
  private writing: Promise<void> | undefined;

  constructor(private readonly options: UserLimitWatchOptions) {}

  get share(): number {
    return this.options.share;
  }

  /** A request the quota granted, after waiting heldMs for the user's quota. */
  granted(heldMs: number): void {
    this.requests++;
    if (heldMs > 0) this.held++;
    const periodMs = this.options.periodMs ?? 15_000;
    if (Date.now() - this.since < periodMs || this.writing) return;
    const { requests, held } = this;
    Object.assign(this, { requests: 0, held: 0, since: Date.now() });
    this.writing = this.note(requests, held, periodMs)
      .catch((error: unknown) => this.options.logger.debug({ err: toError(error) }, 'could not record whether the user limit slows the sync'))
      .finally(() => (this.writing = undefined));
  }

  private async note(requests: number, held: number, periodMs: number): Promise<void> {
    const slowed = held >= MIN_HELD && held >= MIN_HELD_SHARE * requests;
    if (!slowed) {
      if (this.noted) await this.options.control.query('UPDATE syncs SET slowed_by = NULL, slowed_at = NULL WHERE id = $1', [this.options.syncId]);
      this.noted = false;
      return;
    }
    // The user's synced bases and what they may take together (3 a second each, 5 with Turbo).
    const { rows } = await this.options.control.query<{ owner: string | null; bases: string; wanted: string }>(
      `WITH mine AS (
         SELECT c.owner_id FROM syncs s JOIN credential_owners c ON c.kind = 'airtable' AND c.credential_sha256 = s.credential_sha256
          WHERE s.id = $1)
       SELECT (SELECT owner_id FROM mine) AS owner, count(DISTINCT s.base_id) AS bases,
              coalesce(sum(CASE WHEN (s.settings->>'turbo')::boolean THEN 5 ELSE 3 END), 0) AS wanted
         FROM syncs s JOIN credential_owners c ON c.kind = 'airtable' AND c.credential_sha256 = s.credential_sha256
        WHERE s.kind = 'airtable' AND s.state = 'active' AND c.owner_id = (SELECT owner_id FROM mine)`,
      [this.options.syncId],
    );
    const row = rows[0];
    const who = row?.owner ? `user ${row.owner}` : "this key's user";
    const demand = row?.owner ? ` The ${row.bases} synced bases of that user would take up to ${row.wanted} a second.` : '';
    const note =
      `Airtable allows 50 requests a second for all of ${who}'s tokens together, across bases; syncs take at most ${this.options.share} of them.` +
      `${demand} ${held} of this sync's ${requests} requests in the last ${Math.round(periodMs / 1000)} s waited for that limit.`;
    await this.options.control.query('UPDATE syncs SET slowed_by = $2, slowed_at = now() WHERE id = $1', [this.options.syncId, note]);
    this.noted = true;
  }
}
