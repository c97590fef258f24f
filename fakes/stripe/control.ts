/**
 * In-process control of one account, for tests that change things "upstream": the same
 * operations as the HTTP API (same validation, same events, with `request.id` null as for
 * Dashboard or automatic changes) minus HTTP, auth and rate limits. Invalid input throws the
 * StripeApiError the API would have answered with.
 */
import type { AccountState } from './account.ts';
import type { Clock } from './clock.ts';
import { Ctx } from './context.ts';
import { EVENT_RETENTION_SECONDS, type StripeEvent } from './events.ts';
import { type GenerateInput, type GenerateSummary, generateAccount } from './generator.ts';
import { type Input, validateParams } from './params.ts';
import { completeSession } from './resources/checkout.ts';
import { createDispute } from './resources/disputes.ts';
import { RENDERERS } from './resources/index.ts';
import { planOf } from './resources/prices.ts';
import type { Router } from './router.ts';
import { execute } from './server.ts';
import type { StripeObject } from './store.ts';

export type ControlParams = Record<string, Input>;

export interface FakeStripeAccount {
  readonly id: string;
  readonly livemode: boolean;
  /** The account's default API version (events are rendered in it). */
  readonly apiVersion: string;
  /** POST /v1/<resource> ('customers', 'checkout/sessions'…); 'disputes' opens one on `charge`. */
  create(resource: string, params?: ControlParams): StripeObject;
  /** POST /v1/<resource>/<id>. */
  update(resource: string, id: string, params?: ControlParams): StripeObject;
  /** DELETE /v1/<resource>/<id>: Stripe's deleted stub, or the canceled subscription. */
  del(resource: string, id: string, params?: ControlParams): Record<string, unknown>;
  /** POST /v1/<resource>/<id>/<action> ('invoices', id, 'finalize'); ('checkout/sessions', id, 'complete') plays the buyer. */
  act(resource: string, id: string, action: string, params?: ControlParams): StripeObject;
  /** The stored object (undefined when missing or deleted). */
  get(resource: string, id: string): StripeObject | undefined;
  /** Live objects of a resource, newest first. */
  all(resource: string): StripeObject[];
  /**
   * Live objects of a resource as the API shows them now: `all` with the fields that change
   * with time alone (a balance transaction's status) rendered, as a GET would.
   */
  shown(resource: string): StripeObject[];
  /**
   * A change Stripe makes and announces with no event (as a balance transaction's status, or
   * a field its events never cover): the stored object's top-level `fields` replaced. No
   * event, no webhook: only a read shows it.
   */
  silentEdit(resource: string, id: string, fields: Record<string, unknown>): StripeObject;
  /** An object gone with no event (lists and GETs no longer show it). */
  silentDelete(resource: string, id: string): void;
  /** An invoice's or a checkout session's line items, the whole list in /lines order. */
  lines(ownerId: string): StripeObject[];
  count(resource: string): number;
  /** Events still within Stripe's 30-day retention, newest first. */
  events(): StripeEvent[];
  /** Seeded objects of every modeled kind; see GenerateInput. */
  generate(input: GenerateInput): GenerateSummary;
  /** Connect: the accounts connected to this one (made with `POST /v1/accounts`), each controlled like this one. */
  connectedAccounts(): FakeStripeAccount[];
  /** A webhook endpoint's signing secret (the API shows it only when the endpoint is made). */
  webhookSecret(endpointId: string): string;
}

/** 'checkout.sessions', 'checkout_sessions', '/v1/checkout/sessions' → 'checkout/sessions'. */
function resourcePath(resource: string): string {
  const r = resource.replace(/^\/?v1\//, '').replace(/^\//, '');
  return r === 'checkout.sessions' || r === 'checkout_sessions' ? 'checkout/sessions' : r;
}

function collectionOf(resource: string): string {
  const path = resourcePath(resource);
  return path === 'checkout/sessions' ? 'checkout_sessions' : path === 'plans' ? 'prices' : path;
}

export class FakeStripeAccountControl implements FakeStripeAccount {
  constructor(
    private readonly state: AccountState,
    private readonly clock: Clock,
    private readonly router: Router,
  ) {}

  get id(): string {
    return this.state.id;
  }

  get livemode(): boolean {
    return this.state.livemode;
  }

  get apiVersion(): string {
    return this.state.apiVersion;
  }

  private ctx(): Ctx {
    return new Ctx(this.state, this.clock, { id: null, idempotency_key: null }, this.state.apiVersion);
  }

  private call(method: 'GET' | 'POST' | 'DELETE', path: string, params: ControlParams): Record<string, unknown> {
    const resolved = this.router.resolve(method, path);
    if (!resolved?.route) throw new Error(`the fake has no ${method} ${path}`);
    return execute(this.ctx(), method, path, resolved, params) as Record<string, unknown>;
  }

  create(resource: string, params: ControlParams = {}): StripeObject {
    const path = resourcePath(resource);
    if (path === 'disputes') {
      return createDispute(this.ctx(), validateParams({ o: { charge: 's', amount: 'i', reason: 's' }, r: ['charge'] }, params));
    }
    return this.call('POST', `/v1/${path}`, params) as StripeObject;
  }

  update(resource: string, id: string, params: ControlParams = {}): StripeObject {
    return this.call('POST', `/v1/${resourcePath(resource)}/${encodeURIComponent(id)}`, params) as StripeObject;
  }

  del(resource: string, id: string, params: ControlParams = {}): Record<string, unknown> {
    return this.call('DELETE', `/v1/${resourcePath(resource)}/${encodeURIComponent(id)}`, params);
  }

  act(resource: string, id: string, action: string, params: ControlParams = {}): StripeObject {
    const path = resourcePath(resource);
    if (path === 'checkout/sessions' && action === 'complete') {
      const ctx = this.ctx();
      const session = ctx.col('checkout_sessions').get(id);
      if (!session) throw new Error(`no checkout session ${id}`);
      const schema = { o: { payment_method: 's', email: 's', name: 's' } } as const;
      return completeSession(ctx, session, validateParams(schema, params));
    }
    return this.call('POST', `/v1/${path}/${encodeURIComponent(id)}/${action}`, params) as StripeObject;
  }

  get(resource: string, id: string): StripeObject | undefined {
    const obj = this.state.collection(collectionOf(resource)).get(id);
    if (!obj) return undefined;
    if (resourcePath(resource) === 'plans') return obj.recurring ? planOf(this.ctx(), obj) : undefined;
    return obj;
  }

  all(resource: string): StripeObject[] {
    const out: StripeObject[] = [];
    const order = this.state.collection(collectionOf(resource)).ordered();
    const plans = resourcePath(resource) === 'plans';
    for (let i = order.length - 1; i >= 0; i--) {
      const e = order[i];
      if (!e || e.deleted) continue;
      if (plans) {
        if (e.obj.recurring) out.push(planOf(this.ctx(), e.obj));
      } else out.push(e.obj);
    }
    return out;
  }

  shown(resource: string): StripeObject[] {
    const ctx = this.ctx();
    return this.all(resource).map((o) => RENDERERS[o.object]?.(ctx, o) ?? o);
  }

  silentEdit(resource: string, id: string, fields: Record<string, unknown>): StripeObject {
    const collection = this.state.collection(collectionOf(resource));
    const current = collection.get(id);
    if (!current) throw new Error(`no ${resource} ${id}`);
    const edited = { ...current, ...fields } as StripeObject;
    collection.replace(edited);
    return edited;
  }

  silentDelete(resource: string, id: string): void {
    const collection = this.state.collection(collectionOf(resource));
    if (!collection.get(id)) throw new Error(`no ${resource} ${id}`);
    collection.remove(id);
  }

  lines(ownerId: string): StripeObject[] {
    return [...((this.state.lineItems.get(ownerId) ?? []) as StripeObject[])];
  }

  count(resource: string): number {
    if (resourcePath(resource) === 'plans') return this.all('plans').length;
    return this.state.collection(collectionOf(resource)).size;
  }

  events(): StripeEvent[] {
    const oldest = this.clock.now() - EVENT_RETENTION_SECONDS;
    return this.all('events').filter((e) => (e.created as number) >= oldest) as StripeEvent[];
  }

  generate(input: GenerateInput): GenerateSummary {
    return generateAccount(this.state, this.clock, input);
  }

  webhookSecret(endpointId: string): string {
    const secrets = this.state.hidden.get(endpointId)?.secrets as string[] | undefined;
    if (!secrets?.[0]) throw new Error(`no webhook endpoint ${endpointId}`);
    return secrets[0];
  }

  connectedAccounts(): FakeStripeAccount[] {
    return [...this.state.connected.values()].map((state) => new FakeStripeAccountControl(state, this.clock, this.router));
  }
}
