import { createHash } from 'node:crypto';
import type { PlanQuota } from './plan.ts';
import { trimOldest } from '../bounded-map.ts';

export interface KnownCredentialsOptions {
  /** How long a credential stays known after its last 2xx (default 10 min). */
  ttlMs?: number;
  /** How long a quota key's list of sync credentials is kept (default 30 s). */
  syncsTtlMs?: number;
  /** Most entries kept in each map; the oldest go first (default 10,000). */
  maxEntries?: number;
  /** The credentials (SHA-256 hex digests) the active syncs use under a quota key. */
  syncCredentials?: (quotaKey: string) => Promise<string[]>;
}

/**
 * Which credentials are known good for which quota. A proxied request spends a shared
 * quota as a client only with a credential known good for it: a sync's own, or one the
 * upstream accepted for that key (a 2xx) in the last ttlMs. A 401 or 403 forgets it at once.
 * Others get the small unverified allowance (sql/16), so a flood of bad or foreign
 * credentials cannot spend a quota someone else depends on.
 *
 * Kept by a digest of the credential, per process: a new process learns again from the first
 * 2xx. The syncs' credentials are read once per key and kept briefly, so a flood of random
 * credentials costs the control database one query per key and interval, not one each.
 */
export class KnownCredentials {
  private readonly ttlMs: number;
  private readonly syncsTtlMs: number;
  private readonly maxEntries: number;
  /** `key\n digest` → until when it is known good. */
  private readonly good = new Map<string, number>();
  /** Quota key → the syncs' credential digests, until when. */
  private readonly syncs = new Map<string, { digests: Promise<Set<string>>; until: number }>();

  constructor(private readonly options: KnownCredentialsOptions = {}) {
    this.ttlMs = options.ttlMs ?? 10 * 60_000;
    this.syncsTtlMs = options.syncsTtlMs ?? 30_000;
    this.maxEntries = options.maxEntries ?? 10_000;
  }

  /** Whether the quota may be spent as a known client's. */
  async proven(quota: PlanQuota): Promise<boolean> {
    if (quota.proven) return true;
    if (quota.credential === undefined) return false;
    const digest = digestOf(quota.credential);
    const until = this.good.get(`${quota.key}\n${digest}`);
    if (until !== undefined && until > Date.now()) return true;
    return (await this.syncDigests(quota.key)).has(digest);
  }

  /** The upstream answered a request made with this credential: learn or forget it. */
  answered(quota: PlanQuota | undefined, status: number): void {
    if (!quota || quota.proven || quota.credential === undefined) return;
    const entry = `${quota.key}\n${digestOf(quota.credential)}`;
    if (status >= 200 && status < 300) {
      this.good.delete(entry); // re-inserted last: the map's order is the eviction order
      this.good.set(entry, Date.now() + this.ttlMs);
      trimOldest(this.good, this.maxEntries);
    } else if (status === 401 || status === 403) {
      this.good.delete(entry);
      this.syncs.delete(quota.key); // the sync's own may have been revoked: read them again
    }
  }

  private syncDigests(key: string): Promise<Set<string>> {
    const ask = this.options.syncCredentials;
    if (!ask) return Promise.resolve(new Set());
    const hit = this.syncs.get(key);
    if (hit && hit.until > Date.now()) return hit.digests;
    const digests = ask(key).then((list) => new Set(list));
    this.syncs.set(key, { digests, until: Date.now() + this.syncsTtlMs });
    trimOldest(this.syncs, this.maxEntries);
    // A failed read is not kept: the next request asks again.
    digests.catch(() => this.syncs.get(key)?.digests === digests && this.syncs.delete(key));
    return digests;
  }
}

/** The digest a credential is known by: the one the control database keeps of a sync's key. */
const digestOf = (credential: string) => createHash('sha256').update(credential).digest('hex');
