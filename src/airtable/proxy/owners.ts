import type { ProxyKindContext } from '../../proxy/plan.ts';
import { hashToken as digestOf, Secret } from '../../control/secrets.ts';
import { AirtableClient } from '../client.ts';
import { TokenOwners } from '../owners.ts';
import { airtableRule } from './rule.ts';
import { trimOldest } from '../../bounded-map.ts';

/** How long a base's sync credentials and their users are used before they are read again. */
const BASE_TTL_MS = 30_000;
const MAX_BASES = 10_000;

/**
 * What one proxy knows of the tokens its requests carry: the users of the tokens (learned
 * ones kept in memory), and per base the digests of its syncs' tokens with their users, read
 * together once per base and 30 s. So the control database is asked about a base, never about
 * each token a request carries: a flood of random tokens costs it nothing more.
 */
class ProxyOwners {
  readonly owners: TokenOwners;
  private readonly bases = new Map<string, { credentials: Promise<Map<string, string | null>>; until: number }>();

  constructor(private readonly ctx: Pick<ProxyKindContext, 'pool'>) {
    this.owners = new TokenOwners({ pool: ctx.pool });
  }

  /** The active syncs' token digests of a base, each with its user when known; `fresh`: read now. */
  credentials(baseId: string, fresh = false): Promise<Map<string, string | null>> {
    const hit = this.bases.get(baseId);
    if (!fresh && hit && hit.until > Date.now()) return hit.credentials;
    const credentials = this.ctx.pool
      .query<{ digest: string; owner: string | null }>(
        `SELECT DISTINCT s.credential_sha256 AS digest, c.owner_id AS owner
           FROM syncs s LEFT JOIN credential_owners c ON c.kind = 'airtable' AND c.credential_sha256 = s.credential_sha256
          WHERE s.kind = 'airtable' AND s.state = 'active' AND s.base_id = $1 AND s.credential_sha256 IS NOT NULL`,
        [baseId],
      )
      .then(({ rows }) => new Map(rows.map((r) => [r.digest, r.owner])));
    this.bases.delete(baseId);
    this.bases.set(baseId, { credentials, until: Date.now() + BASE_TTL_MS });
    trimOldest(this.bases, MAX_BASES);
    // A failed read is not kept: the next request asks again.
    credentials.catch(() => this.bases.get(baseId)?.credentials === credentials && this.bases.delete(baseId));
    return credentials;
  }

  /** The token's user if known here: learned, or the user of a sync's token of the base. */
  async ownerOf(token: string, baseId: string | undefined): Promise<string | undefined> {
    const known = this.owners.cached(token);
    if (known !== undefined || baseId === undefined) return known;
    const owner = (await this.credentials(baseId)).get(digestOf(token));
    return owner ? this.owners.know(token, owner) : undefined;
  }
}

const byPool = new WeakMap<ProxyKindContext['pool'], ProxyOwners>();

/** The proxy's token knowledge, one per control database pool (every proxy on it shares what it learns). */
export function proxyOwners(ctx: Pick<ProxyKindContext, 'pool'>): ProxyOwners {
  let owners = byPool.get(ctx.pool);
  if (!owners) byPool.set(ctx.pool, (owners = new ProxyOwners(ctx)));
  return owners;
}

/**
 * A token Airtable accepted whose user this proxy does not know: read from the control
 * database, or asked once (whoami, counted against the token's own quota, then its user's), so
 * its next requests count under its user with the user's other tokens and syncs. Only after a
 * 2xx, so a bad token never costs a lookup or a second request.
 */
export function learnOwner(ctx: ProxyKindContext, token: string): void {
  const { owners } = proxyOwners(ctx);
  const client = new AirtableClient({
    baseUrl: ctx.baseUrl,
    token: new Secret(token),
    baseId: '',
    limiter: ctx.limiter,
    quota: { kind: 'client', maxWaitMs: ctx.maxWaitMs },
    rule: airtableRule(ctx.timeScale),
    owners,
    attempts: 1,
    timeoutMs: 15_000,
  });
  owners
    .learn(token, async () => {
      await client.whoami();
      return owners.cached(token);
    })
    .catch((error: unknown) => ctx.logger.debug({ err: error }, "could not learn an Airtable token's user"));
}
