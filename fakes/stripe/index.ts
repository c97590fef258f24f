/**
 * A strict, stateful local Stripe API server:
 * the v1 endpoints of the main billing and payments resources over real HTTP, with Stripe's
 * authentication, restricted keys, per-account rate limits, idempotency, errors, list
 * pagination, expansion and events; an in-process control API per account and a seeded
 * generator. Object shapes follow Stripe's OpenAPI spec for the product's API version.
 *
 * Where it is knowingly not Stripe:
 * - Object shapes are those of the spec's version whatever `Stripe-Version` asks for; the
 *   version only decides whether the pre-2025-03-31 upcoming-invoice endpoint exists.
 * - Time bills only through test clocks (resources/test-clocks.ts): advancing one renews its
 *   customers' subscriptions, ends trials, finalizes, charges and retries invoices, expires
 *   incomplete subscriptions and ends cancel_at ones, all at once (the advance answers
 *   `advancing`, but the clock is `ready` by then). Dunning is one fixed policy: a retry every
 *   3 days, and after 3 failed attempts the subscription is canceled (never `unpaid`); no smart
 *   retry timing, no emails, no invoice.upcoming or invoice.will_be_due, no pause_collection
 *   effect. Real time passing bills nothing: subscriptions off a clock never renew, payouts do
 *   not land, drafts off a clock do not finalize by themselves, clocks are not deleted at
 *   deletes_after (balance transactions do become available). Test-clock objects are dated at
 *   the clock's time and their events at real time, as in Stripe; lists of customers and
 *   subscriptions leave them out unless asked by `test_clock` (or `customer`), as Stripe's do.
 * - Cards only; no 3-D Secure, no taxes, no prorations; Connect is connected accounts and
 *   their events and webhooks, not transfers, fees or capabilities; coupons applied to a
 *   subscription (`discounts`) are recorded with their events but never reduce an amount. Cards
 *   are not checked when attached (pm_card_chargeDeclined attaches, then declines); disputes
 *   open through the control API or Stripe's dispute test card (pm_card_createDispute).
 * - Endpoints of the spec the fake does not model: lists answer empty, retrievals 404
 *   (that is what an account that never used the feature answers), writes 404 saying so.
 */
import { closeServer, listen } from '../shared/listen.ts';
import { SlidingWindowLimiter } from '../shared/rate-limit.ts';
import { AccountState } from './account.ts';
import { type KeyGrant, KeyRegistry } from './auth.ts';
import { Clock } from './clock.ts';
import { type FakeStripeAccount, FakeStripeAccountControl } from './control.ts';
import { accountById, type Core } from './core.ts';
import { Deliveries, type DeliveryStats } from './deliveries.ts';
import { type FaultInjector, stripeFaults } from './faults.ts';
import { type LateEvent, LateEvents, type LateEventsSetting } from './late-events.ts';
import { accountId } from './ids.ts';
import { ROUTES } from './resources/index.ts';
import { Router } from './router.ts';
import { createStripeServer } from './server.ts';
import { specVersion } from './spec/index.ts';
import { Stats } from './stats.ts';
import type { Refusal } from '../shared/stats.ts';

export type { ControlParams, FakeStripeAccount } from './control.ts';
export type { StripeEvent } from './events.ts';
export type { FaultInjector, FaultRule } from './faults.ts';
export type { LateEvent, LateEventsSetting } from './late-events.ts';
export type { GenerateInput, GenerateSummary } from './generator.ts';
export type { StripeObject } from './store.ts';
export { StripeApiError } from './errors.ts';

/** The API version the fake's objects are shaped for (Stripe's OpenAPI spec it was built from). */
export const FAKE_STRIPE_API_VERSION = specVersion();

export interface FakeStripeOptions {
  port?: number;
  host?: string;
  /** Per account, sliding one-second window, then 429; false turns it off. Default 25 test / 100 live. */
  rateLimit?: { testPerSecond: number; livePerSecond: number } | false;
  /** The clock's source (ms since the epoch); default Date.now. `clock.advance` moves it on. */
  now?: () => number;
  /**
   * Count a request's arrival by the `x-fake-arrived-at` stamp of a front in another thread
   * (the simulation's) rather than by when this process reads it. Only for a front you run.
   */
  trustArrivalStamps?: boolean;
  /** Told of every 429 as it is answered, with the account's requests of the second before it. */
  onRefusal?: (refusal: Refusal) => void;
  /** A share of events listed only after a delay, as Stripe's eventually consistent list does (default: none). */
  lateEvents?: LateEventsSetting;
}

export interface FakeStripe {
  url: string;
  port: number;
  close(): Promise<void>;
  /** A new account; `id` defaults to a random acct_…, `apiVersion` to FAKE_STRIPE_API_VERSION. */
  createAccount(input?: { id?: string; livemode?: boolean; apiVersion?: string }): FakeStripeAccount;
  account(id: string): FakeStripeAccount;
  /** Registers a key for an account; rk_ keys need `restricted` permissions. */
  addKey(key: string, grant: KeyGrant): void;
  revokeKey(key: string): void;
  faults: FaultInjector;
  stats: {
    readonly requests: number;
    readonly rateLimited: number;
    byPath(prefix: string): { requests: number; rateLimited: number };
    /** Every URL path requested, with its counts. */
    paths(): Array<[string, { requests: number; rateLimited: number }]>;
    byAccount(accountId: string): { requests: number; rateLimited: number };
    /** Connect: requests made on behalf of a connected account, to paths starting with `prefix`. */
    byActing(accountId: string, prefix?: string): { requests: number; rateLimited: number };
    /** The 429s answered (the first 20), each with the requests of its account in the second before. */
    refusals(): Refusal[];
    reset(): void;
  };
  /**
   * Webhook deliveries to the endpoints accounts register: `pause()` holds them until
   * `resume()` (or `discardHeld()` loses them), `drop(n)` loses the next n, `stats()` counts
   * what was sent.
   */
  webhooks: { pause(): void; resume(): void; discardHeld(): void; drop(n: number): void; stats(): DeliveryStats };
  /**
   * Eventual consistency of `GET /v1/events`: `set({share, delayMs})` lists that share of the
   * events made from then on only after a delay of up to delayMs, behind newer ones; `set()`
   * turns it off. `pending` counts late events not yet listed; `log` has every late event;
   * `listedAfter(objectId, ms)` says whether an event about the object was listed after then.
   */
  lateEvents: {
    set(setting?: LateEventsSetting): void;
    readonly pending: number;
    readonly log: ReadonlyArray<LateEvent>;
    listedAfter(object: string, atMs: number): boolean;
  };
  /** `holdSecond()` keeps every `created` at the current second until `releaseSecond()` (same-second events). */
  clock: { now(): number; nowMs(): number; advance(ms: number): void; holdSecond(): number; releaseSecond(): void };
}

const DEFAULT_RATE_LIMIT = { testPerSecond: 25, livePerSecond: 100 };

export async function startFakeStripe(options: FakeStripeOptions = {}): Promise<FakeStripe> {
  const host = options.host ?? '127.0.0.1';
  const rate = options.rateLimit === undefined ? DEFAULT_RATE_LIMIT : options.rateLimit;
  const clock = new Clock(options.now);
  const core: Core = {
    clock,
    accounts: new Map(),
    keys: new KeyRegistry(),
    faults: stripeFaults(),
    stats: new Stats(),
    limiters: rate === false ? undefined : { test: new SlidingWindowLimiter(rate.testPerSecond), live: new SlidingWindowLimiter(rate.livePerSecond) },
    trustArrivalStamps: options.trustArrivalStamps ?? false,
  };
  const router = new Router(ROUTES);
  const deliveries = new Deliveries();
  const late = new LateEvents(clock);
  late.set(options.lateEvents);
  const controls = new Map<string, FakeStripeAccountControl>();
  const server = createStripeServer(core, router);
  const { port, url } = await listen(server, options.port ?? 0, host);
  const stats = core.stats;
  stats.refusals.onRefusal = options.onRefusal;

  return {
    url,
    port,
    faults: core.faults,
    lateEvents: {
      set: (setting) => late.set(setting),
      get pending() {
        return late.pending;
      },
      log: late.log,
      listedAfter: (object, atMs) => late.listedAfter(object, atMs),
    },
    clock: {
      now: () => clock.now(),
      nowMs: () => clock.nowMs(),
      advance: (ms) => clock.advance(ms),
      holdSecond: () => clock.holdSecond(),
      releaseSecond: () => clock.releaseSecond(),
    },
    stats: {
      get requests() {
        return stats.requests;
      },
      get rateLimited() {
        return stats.rateLimited;
      },
      byPath: (prefix) => stats.byPath(prefix),
      paths: () => stats.paths(),
      byAccount: (id) => stats.byAccount(id),
      byActing: (id, prefix) => stats.byActing(id, prefix),
      refusals: () => [...stats.refusals.refusals],
      reset: () => {
        stats.reset();
        core.limiters?.test.reset();
        core.limiters?.live.reset();
      },
    },
    createAccount: (input = {}) => {
      const id = input.id ?? accountId();
      if (!/^acct_[0-9A-Za-z]{8,}$/.test(id)) throw new Error(`account id ${id} does not look like acct_…`);
      if (core.accounts.has(id)) throw new Error(`account ${id} exists`);
      const version = input.apiVersion ?? FAKE_STRIPE_API_VERSION;
      const state = new AccountState(id, input.livemode === true, version);
      state.deliveries = deliveries;
      state.late = late;
      core.accounts.set(id, state);
      const control = new FakeStripeAccountControl(state, clock, router);
      controls.set(id, control);
      return control;
    },
    account: (id) => {
      const control = controls.get(id);
      if (!control) throw new Error(`no account ${id}`);
      return control;
    },
    addKey: (key, grant) => {
      const state = accountById(core, grant.account);
      if (!state) throw new Error(`no account ${grant.account}`);
      core.keys.add(key, grant, state);
    },
    revokeKey: (key) => core.keys.revoke(key),
    webhooks: {
      pause: () => deliveries.pause(),
      resume: () => deliveries.resume(),
      discardHeld: () => deliveries.discardHeld(),
      drop: (n) => deliveries.drop(n),
      stats: () => ({ ...deliveries.stats }),
    },
    close: () => {
      deliveries.close();
      return closeServer(server);
    },
  };
}
