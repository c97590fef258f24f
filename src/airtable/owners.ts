import type pg from 'pg';
import { hashToken as digestOf } from '../control/secrets.ts';
import { trimOldest } from '../bounded-map.ts';

export interface TokenOwnersOptions {
  /** The control database, where every process finds what any of them learned. Absent: kept here only. */
  pool?: pg.Pool;
  /** How long "nobody knows this token's owner" is believed before asking again (default 30 s). */
  unknownTtlMs?: number;
  /** Most tokens remembered in this process; the oldest go first (default 10,000). */
  maxEntries?: number;
}

/** Rows of tokens no sync uses are dropped this long after they were learned (then learned again if used). */
const FORGET_AFTER = '30 days';

/**
 * Which Airtable user (or service account) owns a personal access token: Airtable's second
 * rate limit counts all of one user's tokens together. Learned once per token with
 * `GET /v0/meta/whoami` and kept in the control database by the token's SHA-256, never the
 * token, so every process counts the token's requests under its owner. An owner never
 * changes, so a known one is kept in memory for good (up to maxEntries).
 */
export class TokenOwners {
  private readonly known = new Map<string, string>();
  /** Digest → until when "not known" is believed. */
  private readonly unknown = new Map<string, number>();
  private readonly learning = new Map<string, Promise<string | undefined>>();
  /** Digest → until when a failed whoami is not asked again. */
  private readonly failed = new Map<string, number>();

  constructor(private readonly options: TokenOwnersOptions = {}) {}

  /** The owner if this process knows it. */
  cached(token: string): string | undefined {
    return this.known.get(digestOf(token));
  }

  /** An owner read elsewhere (the proxy reads a base's syncs' tokens with their users). */
  know(token: string, owner: string): string {
    return this.remember(digestOf(token), owner);
  }

  /** The owner if this process or the control database knows it; never asks Airtable. */
  async owner(token: string): Promise<string | undefined> {
    const digest = digestOf(token);
    const hit = this.known.get(digest);
    if (hit !== undefined) return hit;
    if ((this.unknown.get(digest) ?? 0) > Date.now()) return undefined;
    const { rows } = (await this.options.pool?.query<{ owner: string }>(
      "SELECT owner_id AS owner FROM credential_owners WHERE kind = 'airtable' AND credential_sha256 = $1",
      [digest],
    )) ?? { rows: [] };
    if (rows[0]) return this.remember(digest, rows[0].owner);
    this.unknown.set(digest, Date.now() + (this.options.unknownTtlMs ?? 30_000));
    trimOldest(this.unknown, this.options.maxEntries ?? 10_000);
    return undefined;
  }

  /**
   * The owner, asked of Airtable when nobody knows it yet (`ask`: a whoami with this token,
   * which records the answer); one question per token at a time. A failed question is not
   * asked again for unknownTtlMs; until then the token's requests count under the token itself.
   */
  async learn(token: string, ask: () => Promise<string | undefined>): Promise<string | undefined> {
    const digest = digestOf(token);
    const pending = this.learning.get(digest);
    if (pending) return pending;
    const known = await this.owner(token);
    if (known !== undefined || (this.failed.get(digest) ?? 0) > Date.now()) return known;
    if (this.learning.has(digest)) return this.learning.get(digest);
    const asking = ask()
      .then((owner) => {
        if (owner === undefined) throw new Error('Airtable named no user');
        return owner;
      })
      .catch(() => {
        this.failed.set(digest, Date.now() + (this.options.unknownTtlMs ?? 30_000));
        trimOldest(this.failed, this.options.maxEntries ?? 10_000);
        return undefined;
      })
      .finally(() => this.learning.delete(digest));
    this.learning.set(digest, asking);
    return asking;
  }

  /** An owner Airtable named (the creation check's whoami, or learn's): kept here and in the control database. */
  async record(token: string, owner: string): Promise<string> {
    const digest = digestOf(token);
    await this.options.pool?.query(
      `WITH forgotten AS (
         DELETE FROM credential_owners c WHERE c.kind = 'airtable' AND c.learned_at < now() - interval '${FORGET_AFTER}'
            AND NOT EXISTS (SELECT 1 FROM syncs s WHERE s.credential_sha256 = c.credential_sha256))
       INSERT INTO credential_owners (kind, credential_sha256, owner_id) VALUES ('airtable', $1, $2)
       ON CONFLICT (kind, credential_sha256) DO UPDATE SET owner_id = excluded.owner_id, learned_at = now()`,
      [digest, owner],
    );
    return this.remember(digest, owner);
  }

  private remember(digest: string, owner: string): string {
    this.unknown.delete(digest);
    this.known.set(digest, owner);
    trimOldest(this.known, this.options.maxEntries ?? 10_000);
    return owner;
  }
}
