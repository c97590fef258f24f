import { Secret } from '../../control/secrets.ts';
import { inTransaction } from '../../db/sql.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { QuotaLimiter, QuotaRule } from '../../quota/limiter.ts';
import { STRIPE_API_VERSION } from '../catalog.ts';
import { syncShare } from '../runner.ts';
import { StripeClient, type StripeObject } from '../client.ts';
import { retrievePath } from '../events.ts';
import { applyChanges, type Change } from '../store.ts';
import type { WriteResult } from '../../proxy/plan.ts';
import { hashToken as digestOf } from '../../control/secrets.ts';
import type { SyncTarget, SyncTargets } from '../../proxy/targets.ts';
import { bookkeeping } from '../../syncdb/schemas.ts';
import { stateKeys } from '../scope.ts';
import type pg from 'pg';

export interface StripeWriteContext {
  targets: SyncTargets;
  limiter?: QuotaLimiter;
  /** Where api.stripe.com is reached, for the fetch below. */
  baseUrl: string;
  maxWaitMs: number;
  logger: Logger;
}

/** One proxied Stripe write that succeeded. */
export interface StripeWrite {
  key: string;
  /** The account the key belongs to, when known. */
  accountId: string | undefined;
  /** `Stripe-Account` (Connect): the request acted on this connected account instead. */
  onBehalfOf: string | undefined;
  quotaKey: string;
  rule: QuotaRule;
  /** The API version the answer is rendered in (its `Stripe-Version` header). */
  apiVersion: string | undefined;
  /** When the answer arrived (ms), and the answer's Date header (Stripe's clock). */
  receivedAt: number;
  date: string | undefined;
}

/**
 * The version of a written object: the end of the second the answer was made in (by
 * Stripe's clock, its Date header, when it is sane), as the sync versions events: "the
 * change happened at the latest at the end of that second". An event of an earlier second
 * is older and dropped; one of the same second (equal version) still applies, so a change
 * someone else made just after ours is not lost, and the last event of the second decides.
 */
export function versionOf(receivedAt: number, date: string | undefined): number {
  const stated = date ? Date.parse(date) : Number.NaN;
  const at = Number.isFinite(stated) && Math.abs(stated - receivedAt) < 5 * 60_000 ? stated : receivedAt;
  return Math.floor(at / 1000) * 1000 + 999;
}

/**
 * Requests that change objects: every POST and DELETE, except the ones that only compute
 * (invoice previews, searches). Action routes (`/v1/invoices/{id}/pay`) are writes too.
 */
export function isStripeWrite(method: string, path: string): boolean {
  if (method !== 'POST' && method !== 'DELETE') return false;
  const clean = path.replace(/\/+$/, '');
  if (!clean.startsWith('/v1/')) return false;
  return !/\/(create_preview|upcoming|search)(\/|$)/.test(clean);
}

/**
 * Active Stripe syncs of an account: those whose account id is known and matches, and those
 * whose account is unknown (a restricted key that cannot read /v1/account) but whose key is
 * the very key of the request (by digest).
 */
function syncsOfAccount(targets: SyncTargets, accountId: string | undefined, keyDigest: string | undefined) {
  return targets.where(
    `stripe:${accountId ?? ''}:${keyDigest ?? ''}`,
    "kind = 'stripe' AND (upstream_account_id = $1 OR (upstream_account_id IS NULL AND api_key_sha256 = $2))",
    [accountId ?? null, keyDigest ?? null],
  );
}

/**
 * Platforms' syncs that follow their connected accounts (`connected_accounts`), by the
 * platform's account id or, unknown, by the very key: a write made on behalf of one of
 * those accounts belongs in them too, as that account's row.
 */
function platformSyncs(targets: SyncTargets, platformId: string | undefined, keyDigest: string) {
  return targets.where(
    `stripe-platform:${platformId ?? ''}:${keyDigest}`,
    "kind = 'stripe' AND (upstream_account_id = $1 OR api_key_sha256 = $2) AND (settings->>'connected_accounts')::boolean",
    [platformId ?? null, keyDigest],
  );
}

/** The connected account is one the sync follows already: otherwise its backfill brings the object, once it is found. */
async function follows(tx: pg.ClientBase, schemas: SyncTarget['schemas'], account: string): Promise<boolean> {
  const { rows } = await tx.query(`SELECT 1 FROM ${bookkeeping(schemas, '_state')} WHERE key = $1`, [stateKeys(account).backfill]);
  return rows.length > 0;
}

const isObject = (v: unknown): v is StripeObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Writes an object a Stripe write answered with into every active sync of the account,
 * through the sync's own store (applyChanges: its tables, inline child lists, version guard
 * and tombstones), versioned by versionOf so an older event the sync reads later cannot roll
 * the row back. An answer in another API version than the tables
 * follow is fetched again by id in the pinned one, as the sync does with such events.
 */
export async function writeThroughStripe(ctx: StripeWriteContext, write: StripeWrite, answer: unknown): Promise<WriteResult> {
  const result: WriteResult = { syncs: 0, written: 0, deleted: 0, fetched: false };
  if (!isObject(answer) || typeof answer.id !== 'string' || typeof answer.object !== 'string') return result;
  if (answer.object === 'list' || answer.object === 'search_result') return result;
  const account = write.onBehalfOf ?? write.accountId;
  // The account's own syncs hold the object as theirs; a platform's that follow it, as the connected account's.
  const own = await syncsOfAccount(ctx.targets, account, write.onBehalfOf ? undefined : digestOf(write.key));
  const platforms = write.onBehalfOf ? await platformSyncs(ctx.targets, write.accountId, digestOf(write.key)) : [];
  if (own.length === 0 && platforms.length === 0) return result;

  const deleted = answer.deleted === true;
  const version = versionOf(write.receivedAt, write.date);
  let change: Change = { object: answer, version, ...(deleted ? { deleted: true } : {}) };
  const path = retrievePath(answer.object, answer.id);
  if (!deleted && write.apiVersion !== STRIPE_API_VERSION && path) {
    const client = new StripeClient({
      baseUrl: ctx.baseUrl,
      key: new Secret(write.key),
      limiter: ctx.limiter,
      quotaKey: write.quotaKey,
      // The service's own request, not the customer's: it comes out of the sync's share (as
      // urgent, someone waits on it), or a customer keeping to the rest of the limit, partly
      // with requests straight to Stripe that the quota never sees, would be answered 429.
      quota: { kind: 'sync', urgent: true, syncLimit: syncShare(write.key, false), shareMargin: true, maxWaitMs: ctx.maxWaitMs },
      rule: write.rule,
      attempts: 1,
      timeoutMs: 15_000,
      ...(write.onBehalfOf ? { stripeAccount: write.onBehalfOf } : {}),
    });
    try {
      // At least as new as the answer: it keeps the answer's version.
      change = { object: await client.request<StripeObject>('GET', path), version };
      result.fetched = true;
    } catch (error) {
      ctx.logger.warn(
        { object: answer.object, error: toError(error).message },
        'fetching a written Stripe object in the pinned API version failed; writing the answer as it came',
      );
    }
  }

  const limits = ["lock_timeout = '5s'", "statement_timeout = '15s'"];
  const connected = write.onBehalfOf ?? null;
  const applied = await Promise.all([
    ...own.map((target) => inTransaction(target.pool, (tx) => applyChanges(tx, [change]), limits)),
    ...platforms.map((target) =>
      inTransaction(
        target.pool,
        async (tx) => ((await follows(tx, target.schemas, connected!)) ? applyChanges(tx, [change], [], connected) : undefined),
        limits,
      ),
    ),
  ]);
  for (const a of applied) {
    if (!a) continue;
    result.syncs++;
    result.written += a.written;
    result.deleted += a.deleted;
  }
  return result;
}
