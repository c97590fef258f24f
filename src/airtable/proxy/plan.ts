import type http from 'node:http';
import type { Plan, PlanQuota, PlanRequest, ProxyKindContext } from '../../proxy/plan.ts';
import { headerOf, TRANSLATE_HEADER } from '../../proxy/headers.ts';
import { type ProxyRoute, upstreamPathOf } from '../../proxy/routing.ts';
import type { QuotaRule } from '../../quota/limiter.ts';
import { AIRTABLE_RULE, AIRTABLE_TOKEN_RULE, airtableTokenKey, tokenQuotaOf } from '../client.ts';
import { loadBuilt } from '../tables.ts';
import { parseAirtablePath } from './paths.ts';
import { translateAirtable } from './translate.ts';
import { writeThroughAirtable } from './write.ts';
import { refuse } from '../../proxy/errors.ts';

const bearerOf = (authorization: string | undefined) => /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];

/** The base's rule, on the same time scale as the sync's (tests speed both up together). */
export const airtableRule = (timeScale = 1): QuotaRule =>
  timeScale === 1 ? AIRTABLE_RULE : { ...AIRTABLE_RULE, windowMs: AIRTABLE_RULE.windowMs / timeScale };

function fieldsById(body: Buffer | undefined, query: string): boolean {
  const fromQuery = new URLSearchParams(query).get('returnFieldsByFieldId');
  if (fromQuery === 'true' || fromQuery === '1') return true;
  if (!body) return false;
  try {
    return (JSON.parse(body.toString('utf8')) as { returnFieldsByFieldId?: unknown }).returnFieldsByFieldId === true;
  } catch {
    return false;
  }
}

/**
 * The quota an Airtable request counts against, known from its path and token alone (so the
 * proxy can ask for it while the body is still arriving): the base and its token (as the
 * sync's requests do), or the token alone for a request that names no base.
 */
export function airtableQuota(ctx: Pick<ProxyKindContext, 'timeScale'>, req: http.IncomingMessage, route: ProxyRoute): PlanQuota | undefined {
  const parsed = parseAirtablePath(req.method ?? 'GET', route.path);
  const token = bearerOf(headerOf(req, 'authorization'));
  const rule = airtableRule(ctx.timeScale);
  if (parsed.baseId) {
    // The base id is in the path for anyone to write: only a token known good for the base
    // spends its quota as a client; any other gets one request per window (src/proxy/credentials.ts).
    const label = `Airtable base ${parsed.baseId}`;
    return { key: parsed.baseId, rule, label, unverified: 1, ...(token ? { credential: token, also: tokenQuotaOf(token, rule) } : {}) };
  }
  // A request that names no base spends its token's own quota, nobody else's.
  return token ? { key: airtableTokenKey(token), rule: AIRTABLE_TOKEN_RULE, label: 'Airtable token', proven: true } : undefined;
}

/** The tokens (by digest) the active Airtable syncs of the quota's base use. */
export async function airtableSyncCredentials(ctx: ProxyKindContext, baseId: string): Promise<string[]> {
  const { rows } = await ctx.pool.query<{ digest: string }>(
    "SELECT DISTINCT credential_sha256 AS digest FROM syncs WHERE kind = 'airtable' AND state = 'active' AND base_id = $1 AND credential_sha256 IS NOT NULL",
    [baseId],
  );
  return rows.map((r) => r.digest);
}

/** Active Airtable syncs of a base: every one is written (several accounts may sync one base). */
function syncsOfBase(ctx: ProxyKindContext, baseId: string) {
  return ctx.targets.where(`airtable:${baseId}`, "kind = 'airtable' AND base_id = $1", [baseId]);
}

/**
 * Airtable: the quota is airtableQuota's (the caller may have worked it out already). Writes
 * are read whole (small: 10 records at most), as are requests to translate.
 */
export function airtablePlanner(ctx: ProxyKindContext) {
  return async ({ req, route, readBody, early }: PlanRequest): Promise<Plan> => {
    const quota = early ?? airtableQuota(ctx, req, route);
    const method = req.method ?? 'GET';
    const parsed = parseAirtablePath(method, route.path);
    const rule = airtableRule(ctx.timeScale);
    const translate = headerOf(req, TRANSLATE_HEADER)?.trim() === '1';
    if (!translate && parsed.kind !== 'write') return { path: upstreamPathOf(route), quota };

    let body = await readBody();
    let { path, query } = route;
    if (translate && parsed.baseId && parsed.table !== undefined) {
      const syncs = await syncsOfBase(ctx, parsed.baseId);
      if (syncs.length === 0) {
        throw refuse('unprocessable', `svc-translate: no active sync of base ${parsed.baseId} holds the database names to translate from`);
      }
      const translated = translateAirtable({ path, query, body, contentType: headerOf(req, 'content-type') }, [...(await loadBuilt(syncs[0]!.pool)).values()]);
      ({ path, query, body } = translated);
    }
    const plan: Plan = { path: upstreamPathOf({ path, query, hasQuery: route.hasQuery }), quota, ...(body ? { body } : {}) };
    const final = parseAirtablePath(method, path);
    if (parsed.kind === 'write' && final.baseId && final.table !== undefined) {
      const write = { baseId: final.baseId, table: final.table, method, byFieldId: fieldsById(body, query) };
      const writeContext = {
        targets: () => syncsOfBase(ctx, write.baseId),
        limiter: ctx.limiter,
        baseUrl: ctx.baseUrl,
        rule,
        maxWaitMs: ctx.maxWaitMs,
        logger: ctx.logger,
      };
      plan.writeThrough = (answer) => writeThroughAirtable(writeContext, write, answer);
    }
    return plan;
  };
}
