/**
 * Connected accounts' changes by push: with a public URL, the platform's sync registers a
 * Connect webhook endpoint (`connect: true`, every event) whose deliveries come to
 * POST /hooks/stripe/<sync id>. A delivery is checked against the endpoint's secret the way
 * Stripe signs (`Stripe-Signature: t=…,v1=…`, HMAC-SHA256 of "<t>.<body>"), must be under
 * five minutes old and not seen before; then it only wakes the reader of the account it names,
 * which reads that account's feed through the API as always. A delivery's data is never used.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import type { InboundDelivery, KindInbound, SyncHooks } from '../kinds/kind.ts';
import type { Logger } from '../log.ts';
import { loadState, saveState } from '../sync/state.ts';
import { bookkeeping, type SyncSchemas } from '../syncdb/schemas.ts';
import { STRIPE_API_VERSION } from './catalog.ts';
import { type StripeClient, StripeError, type StripeObject } from './client.ts';
import { inTransaction } from '../db/sql.ts';
import { applyChanges } from './store.ts';
import { STRIPE_SCHEMAS } from './migrations.ts';

/** Stripe's own tolerance: a delivery signed longer ago than this (or this far ahead) is refused. */
export const SIGNATURE_TOLERANCE_S = 300;
const HOOK_KEY = 'stripe.hook';

interface Signature {
  t: number;
  v1: string[];
}

function parse(header: unknown): Signature | undefined {
  if (typeof header !== 'string' || header.length > 2048) return undefined;
  let t: number | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const [name, value] = part.trim().split('=', 2) as [string, string | undefined];
    if (name === 't' && value && /^\d{1,12}$/.test(value)) t = Number(value);
    if (name === 'v1' && value && /^[0-9a-f]{64}$/i.test(value)) v1.push(value.toLowerCase());
  }
  return t !== undefined && v1.length > 0 ? { t, v1 } : undefined;
}

/**
 * Whether a body is signed by the secret, within the tolerance of `nowS`: any of the header's
 * v1 entries may match (Stripe sends one per secret while a secret is being rolled).
 */
export function verifyStripeSignature(header: unknown, body: Buffer, secret: string, nowS = Date.now() / 1000): boolean {
  return verifiedSignature(header, body, secret, nowS) !== undefined;
}

/** The header's signature that matches, as `<t> <v1>`: what names the delivery itself. */
function verifiedSignature(header: unknown, body: Buffer, secret: string, nowS = Date.now() / 1000): string | undefined {
  const signature = parse(header);
  if (!signature || Math.abs(nowS - signature.t) > SIGNATURE_TOLERANCE_S) return undefined;
  const expected = createHmac('sha256', secret).update(`${signature.t}.`).update(body).digest();
  const match = signature.v1.find((v) => timingSafeEqual(expected, Buffer.from(v, 'hex')));
  return match && `${signature.t} ${match}`;
}

const header = (delivery: Pick<InboundDelivery, 'headers'>) => delivery.headers['stripe-signature'];

/** The hooks route's part: Stripe's signature; the connected account a delivery names; its replay key. */
export const stripeInbound: KindInbound = {
  signed(headers) {
    const signature = parse(header({ headers }));
    return signature !== undefined && Math.abs(Date.now() / 1000 - signature.t) <= SIGNATURE_TOLERANCE_S;
  },
  verify: (delivery) => verifyStripeSignature(header(delivery), delivery.body, delivery.secret.reveal()),
  partOf(delivery) {
    try {
      const account = (JSON.parse(delivery.body.toString('utf8')) as { account?: unknown }).account;
      return typeof account === 'string' && /^acct_[0-9A-Za-z]{1,64}$/.test(account) ? account : undefined;
    } catch {
      return undefined;
    }
  },
  // The timestamp and the signature that verified, not the header's first: entries that match
  // nothing may be added in front of a real one, making the same delivery look new each time.
  replayKey: (delivery) => verifiedSignature(header(delivery), delivery.body, delivery.secret.reveal()),
};

/** The endpoint the sync registered, as kept in its database. */
interface HookState {
  id: string;
  url: string;
}

/**
 * Makes sure the platform has the sync's Connect endpoint at `hooks.url`: made when missing,
 * gone upstream or at another URL (the old one is deleted), its secret sealed through
 * `hooks.save`. Returns false, with why, when the key may not manage endpoints.
 */
export async function ensureConnectEndpoint(
  client: StripeClient,
  db: pg.Pool,
  hooks: SyncHooks,
  logger: Logger,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const state = await loadState<HookState>(db, STRIPE_SCHEMAS, HOOK_KEY);
  try {
    if (state && state.url === hooks.url) {
      const current = await client.request<{ status?: string }>('GET', `/v1/webhook_endpoints/${encodeURIComponent(state.id)}`).catch((error) => {
        if (error instanceof StripeError && error.kind === 'missing') return undefined;
        throw error;
      });
      if (current?.status === 'enabled') return { ok: true };
      if (current) await removeEndpoint(client, state.id, db);
    } else if (state) {
      await removeEndpoint(client, state.id, db);
    }
    // One a runner stopped before Stripe's answer came was never recorded: it would go on
    // receiving deliveries no one can verify, and hold one of the account's 16 endpoints.
    await removeStrays(client, hooks.url);
    const created = await client.request<{ id: string; secret: string } & StripeObject>('POST', '/v1/webhook_endpoints', {
      url: hooks.url,
      connect: true,
      enabled_events: ['*'],
      api_version: STRIPE_API_VERSION,
      description: 'Tributary: changes of connected accounts',
    });
    await hooks.save(created.id, created.secret);
    // Stripe sends no event for an endpoint: the table learns of the sync's own from its answer.
    // The secret is shown in this answer only, and never goes into the table readers see.
    const { secret: _secret, ...shown } = created;
    await inTransaction(db, async (tx) => {
      await applyChanges(tx, [{ object: shown, version: Date.now() }]);
      await saveState(tx, STRIPE_SCHEMAS, HOOK_KEY, { id: created.id, url: hooks.url } satisfies HookState);
    });
    logger.info({ endpoint: created.id }, 'stripe connect webhook endpoint registered');
    return { ok: true };
  } catch (error) {
    if (error instanceof StripeError && (error.kind === 'permission' || error.kind === 'invalid')) {
      return { ok: false, reason: `${error.status}: ${error.message}` };
    }
    throw error;
  }
}

/**
 * Deletes the sync's endpoint, if it made one: the setting turned off (`running`: its row in
 * `webhook_endpoint` goes too), or the sync deleted (its database goes anyway).
 */
export async function removeConnectEndpoint(
  client: StripeClient,
  db: pg.Pool,
  options: { schemas?: SyncSchemas; running: boolean; url?: string },
): Promise<void> {
  const schemas = options.schemas ?? STRIPE_SCHEMAS;
  const state = await loadState<HookState>(db, schemas, HOOK_KEY);
  if (state) {
    await removeEndpoint(client, state.id, options.running ? db : undefined);
    await db.query(`DELETE FROM ${bookkeeping(schemas, '_state')} WHERE key = $1`, [HOOK_KEY]);
  }
  // A sync deleted while its runner was registering: Stripe made an endpoint the sync never recorded.
  if (options.url) await removeStrays(client, options.url);
}

/** Every endpoint of the account at `url`: the URL names the sync, so any there is its own. */
async function removeStrays(client: StripeClient, url: string): Promise<void> {
  const endpoints = await client.listAll('/v1/webhook_endpoints');
  for (const endpoint of endpoints) if (endpoint.url === url) await removeEndpoint(client, String(endpoint.id));
}

async function removeEndpoint(client: StripeClient, id: string, db?: pg.Pool): Promise<void> {
  await client.request('DELETE', `/v1/webhook_endpoints/${encodeURIComponent(id)}`).catch((error) => {
    if (!(error instanceof StripeError && error.kind === 'missing')) throw error;
  });
  if (db)
    await inTransaction(db, (tx) => applyChanges(tx, [{ object: { id, object: 'webhook_endpoint', deleted: true }, version: Date.now(), deleted: true }]));
}

/** The sync's pings (PassRequests, for its id): counted, waited on, and the accounts they named. */
export interface Pings {
  mark(): number;
  since(mark: number, timeoutMs: number, signal: AbortSignal): Promise<boolean>;
  take(): string[];
}

/** With push trusted, each account's feed is still read this often: the fallback that fills any gap. */
export const PUSHED_POLL_MS = 30_000;
/** A read on the timer that finds events no delivery announced: deliveries are not arriving; polling at full pace this long. */
const DISTRUST_MS = 10 * 60_000;

/**
 * Push for one sync: the endpoint kept registered while the setting is on, deliveries turned
 * into wake-ups of the accounts they name, and trust withdrawn when reads on the timer keep
 * finding what no delivery announced.
 */
export class ConnectPush {
  private registered = false;
  private distrustUntil = 0;
  private refused: string | undefined;

  constructor(private readonly options: { hooks?: SyncHooks; pings?: Pings; db: pg.Pool; logger: Logger }) {}

  /** Deliveries wake the accounts now, so their feeds may be read only every PUSHED_POLL_MS. */
  get trusted(): boolean {
    return this.registered && Date.now() >= this.distrustUntil;
  }

  /** What the status should say about push, if anything. */
  get warning(): string | undefined {
    if (this.refused) return `connected accounts' changes are read every few seconds: the key cannot register a webhook endpoint (${this.refused})`;
    if (this.registered && Date.now() < this.distrustUntil) {
      return "Stripe's Connect webhook deliveries are not arriving (reads found changes no delivery announced): connected accounts are read every few seconds meanwhile";
    }
    return undefined;
  }

  /** Registers (or checks) the endpoint when the service has a public URL. */
  async ensure(client: StripeClient): Promise<void> {
    if (!this.options.hooks) return;
    const result = await ensureConnectEndpoint(client, this.options.db, this.options.hooks, this.options.logger);
    this.registered = result.ok;
    this.refused = result.ok ? undefined : result.reason;
  }

  /** The setting is off: the endpoint goes. */
  async remove(client: StripeClient): Promise<void> {
    this.registered = false;
    this.refused = undefined;
    await removeConnectEndpoint(client, this.options.db, { running: true });
  }

  /** A read on the timer found events: while push was trusted, deliveries missed them. */
  missed(): void {
    if (!this.trusted) return;
    this.distrustUntil = Date.now() + DISTRUST_MS;
    this.options.logger.warn('a connected account had changes no webhook delivery announced; reading every account at full pace for 10 minutes');
  }

  /** Until `signal` aborts: each ping wakes the accounts it named (`wake`). */
  async listen(signal: AbortSignal, wake: (account: string) => void): Promise<void> {
    const pings = this.options.pings;
    if (!pings) return;
    while (!signal.aborted) {
      const mark = pings.mark();
      for (const account of pings.take()) wake(account);
      await pings.since(mark, 60_000, signal);
    }
  }
}
