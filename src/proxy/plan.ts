import type http from 'node:http';
import { loadBuilt } from '../airtable/tables.ts';
import type { Logger } from '../log.ts';
import type { QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import { stripeQuotaKey, stripeRule } from '../stripe/client.ts';
import { parseAirtablePath } from './airtable-paths.ts';
import { translateAirtable } from './airtable-translate.ts';
import { writeThroughAirtable, type WriteResult } from './airtable-write.ts';
import { refuse } from './errors.ts';
import { headerOf, TRANSLATE_HEADER } from './headers.ts';
import { AIRTABLE_TOKEN_RULE, airtableTokenKey, tokenQuotaOf } from '../airtable/client.ts';
import { airtableRule } from './quota.ts';
import { type ProxyRoute, type UpstreamHost, upstreamPathOf } from './routing.ts';
import type { StripeAccounts } from './stripe-accounts.ts';
import { stripeKeyOf } from './stripe-accounts.ts';
import { isStripeWrite, writeThroughStripe } from './stripe-write.ts';
import type { SyncTargets } from './targets.ts';

export interface PlanContext {
  targets: SyncTargets;
  limiter?: QuotaLimiter;
  timeScale: number;
  maxWaitMs: number;
  logger: Logger;
  baseUrls: Record<UpstreamHost, string>;
  accounts: StripeAccounts;
}

export interface AnswerMeta {
  receivedAt: number;
  /** The answer's Stripe-Version and Date headers. */
  apiVersion: string | undefined;
  date: string | undefined;
}

/** What to do with one request, decided before it goes upstream. */
export interface Plan {
  /** Path and query sent upstream. */
  path: string;
  /** The body, when it had to be read first (a write, a translation); otherwise the client's is streamed. */
  body?: Buffer;
  /** The shared-quota key and rule the request counts against; none without credentials to count. */
  quota?: { key: string; rule: QuotaRule; also?: { key: string; rule: QuotaRule } };
  /** For a write: what to write on a 2xx answer, before the client gets it. */
  writeThrough?: (answer: unknown, meta: AnswerMeta) => Promise<WriteResult>;
}

const bearerOf = (authorization: string | undefined) => /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];

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
export function airtableQuota(ctx: Pick<PlanContext, 'timeScale'>, req: http.IncomingMessage, route: ProxyRoute): Plan['quota'] {
  const parsed = parseAirtablePath(req.method ?? 'GET', route.path);
  const token = bearerOf(headerOf(req, 'authorization'));
  const rule = airtableRule(ctx.timeScale);
  if (parsed.baseId) return { key: parsed.baseId, rule, ...(token ? { also: tokenQuotaOf(token, rule) } : {}) };
  return token ? { key: airtableTokenKey(token), rule: AIRTABLE_TOKEN_RULE } : undefined;
}

/**
 * Airtable: the quota is airtableQuota's (the caller may have worked it out already). Writes
 * are read whole (small: 10 records at most), as are requests to translate.
 */
export async function planAirtable(
  ctx: PlanContext,
  req: http.IncomingMessage,
  route: ProxyRoute,
  readBody: () => Promise<Buffer | undefined>,
  quota = airtableQuota(ctx, req, route),
): Promise<Plan> {
  const method = req.method ?? 'GET';
  const parsed = parseAirtablePath(method, route.path);
  const rule = airtableRule(ctx.timeScale);
  const translate = headerOf(req, TRANSLATE_HEADER)?.trim() === '1';
  if (!translate && parsed.kind !== 'write') return { path: upstreamPathOf(route), quota };

  let body = await readBody();
  let { path, query } = route;
  if (translate && parsed.baseId && parsed.table !== undefined) {
    const syncs = await ctx.targets.airtable(parsed.baseId);
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
    const writeContext = { targets: ctx.targets, limiter: ctx.limiter, baseUrl: ctx.baseUrls['api.airtable.com'], rule, maxWaitMs: ctx.maxWaitMs, logger: ctx.logger };
    plan.writeThrough = (answer) => writeThroughAirtable(writeContext, write, answer);
  }
  return plan;
}

/**
 * Stripe: the account the key belongs to is the quota key (as the sync's), found once per
 * key; a key whose account cannot be known counts under its own digest. The body streams
 * through; a write's answer is read whole.
 */
export async function planStripe(ctx: PlanContext, req: http.IncomingMessage, route: ProxyRoute): Promise<Plan> {
  const method = req.method ?? 'GET';
  const key = stripeKeyOf(headerOf(req, 'authorization'));
  const onBehalf = headerOf(req, 'stripe-account');
  const onBehalfOf = onBehalf && /^acct_[A-Za-z0-9]+$/.test(onBehalf) ? onBehalf : undefined;
  const write = key !== undefined && isStripeWrite(method, route.path);
  // Asked only when it matters: for the quota, or to find a write's sync.
  const accountId = key !== undefined && (ctx.limiter || write) ? await ctx.accounts.accountOf(key) : undefined;
  const quota = key !== undefined ? { key: stripeQuotaKey(accountId ?? null, key), rule: stripeRule(key) } : undefined;
  const plan: Plan = { path: upstreamPathOf(route), quota };
  if (write && quota) {
    const writeContext = { targets: ctx.targets, limiter: ctx.limiter, baseUrl: ctx.baseUrls['api.stripe.com'], maxWaitMs: ctx.maxWaitMs, logger: ctx.logger };
    plan.writeThrough = (answer, meta) =>
      writeThroughStripe(
        writeContext,
        { key, accountId, onBehalfOf, quotaKey: quota.key, rule: quota.rule, apiVersion: meta.apiVersion, receivedAt: meta.receivedAt, date: meta.date },
        answer,
      );
  }
  return plan;
}
