import type http from 'node:http';
import type { Plan, PlanQuota, PlanRequest, ProxyKindContext } from '../../proxy/plan.ts';
import { headerOf, TRANSLATE_HEADER } from '../../proxy/headers.ts';
import { type ProxyRoute, upstreamPathOf } from '../../proxy/routing.ts';
import { userQuotaOf } from '../client.ts';
import { loadBuilt } from '../tables.ts';
import { learnOwner, proxyOwners } from './owners.ts';
import { airtableRule } from './rule.ts';
import { parseAirtablePath } from './paths.ts';
import { translateAirtable } from './translate.ts';
import { writeThroughAirtable } from './write.ts';
import { refuse } from '../../proxy/errors.ts';

const bearerOf = (authorization: string | undefined) => /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];

export { airtableRule };

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
 * proxy can ask for it while the body is still arriving): the base and its token's user (as
 * the sync's requests do), or the user alone for a request that names no base. A token whose
 * user nobody knows yet counts under the token itself.
 */
export async function airtableQuota(
  ctx: Pick<ProxyKindContext, 'timeScale' | 'pool'>,
  req: http.IncomingMessage,
  route: ProxyRoute,
): Promise<PlanQuota | undefined> {
  const parsed = parseAirtablePath(req.method ?? 'GET', route.path);
  const token = bearerOf(headerOf(req, 'authorization'));
  const rule = airtableRule(ctx.timeScale);
  const owner = token === undefined ? undefined : await proxyOwners(ctx).ownerOf(token, parsed.baseId);
  const user = token === undefined ? undefined : userQuotaOf(owner, token, rule);
  if (parsed.baseId) {
    // The base id is in the path for anyone to write: only a token known good for the base
    // spends its quota as a client; any other gets one request per window (src/proxy/credentials.ts).
    const label = `Airtable base ${parsed.baseId}`;
    return { key: parsed.baseId, rule, label, unverified: 1, ...(token ? { credential: token, also: user } : {}) };
  }
  // A request that names no base spends its user's (or token's) own quota, nobody else's.
  return user ? { key: user.key, rule: user.rule, label: owner ? `Airtable user ${owner}` : 'Airtable token', proven: true } : undefined;
}

/** The tokens (by digest) the active Airtable syncs of the quota's base use (KnownCredentials keeps them 30 s). */
export async function airtableSyncCredentials(ctx: ProxyKindContext, baseId: string): Promise<string[]> {
  return [...(await proxyOwners(ctx).credentials(baseId, true)).keys()];
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
    const quota = early ?? (await airtableQuota(ctx, req, route));
    const method = req.method ?? 'GET';
    const parsed = parseAirtablePath(method, route.path);
    const rule = airtableRule(ctx.timeScale);
    const translate = headerOf(req, TRANSLATE_HEADER)?.trim() === '1';
    // A token whose user is not known yet: learned after its first 2xx.
    const token = bearerOf(headerOf(req, 'authorization'));
    const unowned = token !== undefined && ctx.limiter !== undefined && (await proxyOwners(ctx).ownerOf(token, parsed.baseId)) === undefined;
    const ended = unowned
      ? (status: number | undefined) => {
          if (status !== undefined && status >= 200 && status < 300) learnOwner(ctx, token);
        }
      : undefined;
    if (!translate && parsed.kind !== 'write') return { path: upstreamPathOf(route), quota, ...(ended ? { ended } : {}) };

    let body = await readBody();
    let { path, query } = route;
    if (translate && parsed.baseId && parsed.table !== undefined) {
      const syncs = await syncsOfBase(ctx, parsed.baseId);
      if (syncs.length === 0) {
        throw refuse('unprocessable', `svc-translate: no active sync of base ${parsed.baseId} holds the database names to translate from`);
      }
      const translated = translateAirtable({ path, query, body, contentType: headerOf(req, 'content-type') }, [
        ...(await loadBuilt(syncs[0]!.pool, syncs[0]!.schemas)).values(),
      ]);
      ({ path, query, body } = translated);
    }
    const plan: Plan = { path: upstreamPathOf({ path, query, hasQuery: route.hasQuery }), quota, ...(body ? { body } : {}), ...(ended ? { ended } : {}) };
    const final = parseAirtablePath(method, path);
    if (parsed.kind === 'write' && final.baseId && final.table !== undefined) {
      const write = { baseId: final.baseId, table: final.table, method, byFieldId: fieldsById(body, query) };
      const writeContext = {
        targets: () => syncsOfBase(ctx, write.baseId),
        limiter: ctx.limiter,
        owners: proxyOwners(ctx).owners,
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
