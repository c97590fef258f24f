/**
 * A strict local Airtable API server: records,
 * metadata, webhooks, rate limits and fault injection, over real HTTP, plus an in-process
 * control API per base. Used by the sync, the proxy, tests, benchmarks and the demo.
 *
 * Where it is knowingly not Airtable:
 * - Formulas: a subset of functions (see formula/functions.ts); no locale or time-zone formatting;
 *   LAST_MODIFIED_TIME({field}) ignores its arguments; lastModifiedTime fields track all fields.
 * - cellFormat=string is a rough rendering; views never filter or sort.
 * - Lookups and webhook diffs reach one link hop (a lookup of a lookup is not re-diffed).
 * - Generated rows produce no record payloads for webhooks that existed before `generate`.
 * - A field type change (`retypeField`, the UI's) reaches webhooks as one field change, with no
 *   record changes for the converted cells.
 * - Error types Airtable does not document (upsert with several matches, metadata validation)
 *   are plausible guesses; the documented ones (INVALID_RECORDS, UNKNOWN_FIELD_NAME, …) are real.
 */
import { FakeBaseControl, type FakeBase } from './control.ts';
import { type Core, Stats } from './core.ts';
import type { Refusal } from '../shared/stats.ts';
import { type FaultInjector, FaultList } from './faults.ts';
import { randomId, seededId } from './ids.ts';
import { IteratorStore } from './list-records.ts';
import type { World } from './model.ts';
import { closeServer, listen } from '../shared/listen.ts';
import { SlidingWindowLimiter } from '../shared/rate-limit.ts';
import { createFakeServer } from './server.ts';
import { TokenRegistry } from './tokens.ts';
import { WebhookStore } from './webhooks.ts';

export type { FakeBase, RecordJson } from './control.ts';
export type { FaultInjector, FaultRule } from './faults.ts';
export type { GenerateInput } from './generator.ts';
export type { FieldSpec } from './schema-ops.ts';
export type { FieldJson, TableJson } from './schema.ts';
export { ALL_SCOPES } from './tokens.ts';

export interface FakeAirtableOptions {
  port?: number;
  host?: string;
  /**
   * Requests a second per base, and per user (all of one user's tokens together, across
   * bases), and how long going over either locks it out; false turns the limiter off
   * (benchmarks). Default {perBasePerSecond:5, perUserPerSecond:50, lockoutMs:30000}.
   */
  rateLimit?: { perBasePerSecond: number; perUserPerSecond: number; lockoutMs: number } | false;
  /** How long a list iterator (offset) lives without use; default 300_000 ms. */
  offsetTtlMs?: number;
  /** Webhook lifetime; default 7 days. */
  webhookTtlMs?: number;
  /** How long webhook payloads are kept; default 7 days. */
  payloadTtlMs?: number;
  /**
   * Count a request's arrival by the `x-fake-arrived-at` stamp of a front in another thread
   * (the simulation's) rather than by when this process reads it. Only for a front you run.
   */
  trustArrivalStamps?: boolean;
}

export interface FakeAirtable {
  url: string;
  port: number;
  close(): Promise<void>;
  /** A personal access token; `user` (`usr…`) makes several tokens one user's. Returns the user id. */
  addToken(token: string, grant: { bases: string[] | '*'; scopes?: string[]; user?: string }): string;
  revokeToken(token: string): void;
  /** Moves the fake's clock on (its attachment URLs expire by it, as Airtable's do after a few hours). */
  advanceClock(ms: number): void;
  /** A webhook's MAC secret, as Airtable gave it at creation (tests sign pings of their own with it). */
  webhookSecret(id: string): Buffer;
  createBase(input: { id?: string; name: string }): FakeBase;
  base(id: string): FakeBase;
  faults: FaultInjector;
  stats: {
    requests: number;
    rateLimited: number;
    byBase(baseId: string): { requests: number; rateLimited: number };
    /** The 429s answered (the first 20), each with the requests of its base or token in the second before. */
    refusals(): Refusal[];
    reset(): void;
  };
}

const WEEK = 7 * 24 * 3_600_000;
const DEFAULT_RATE_LIMIT = { perBasePerSecond: 5, perUserPerSecond: 50, lockoutMs: 30_000 };

export async function startFakeAirtable(options: FakeAirtableOptions = {}): Promise<FakeAirtable> {
  const host = options.host ?? '127.0.0.1';
  // Moved on by advanceClock: attachment URLs, and everything else the fake times, see a later hour.
  let skew = 0;
  const owner = { id: seededId('usr', 0x0a11ce, 0), email: 'owner@example.com', name: 'Base Owner' };
  const world: World = { users: new Map([[owner.id, owner]]), bases: new Map(), ownerId: owner.id, url: '', now: () => Date.now() + skew };
  const rate = options.rateLimit === undefined ? DEFAULT_RATE_LIMIT : options.rateLimit;
  const core: Core = {
    world,
    webhooks: new WebhookStore(world, { webhookTtlMs: options.webhookTtlMs ?? WEEK, payloadTtlMs: options.payloadTtlMs ?? WEEK }),
    iterators: new IteratorStore(options.offsetTtlMs ?? 300_000),
    tokens: new TokenRegistry(world.users),
    faults: new FaultList(),
    stats: new Stats(),
    limiters:
      rate === false
        ? undefined
        : { base: new SlidingWindowLimiter(rate.perBasePerSecond, rate.lockoutMs), user: new SlidingWindowLimiter(rate.perUserPerSecond, rate.lockoutMs) },
    trustArrivalStamps: options.trustArrivalStamps ?? false,
  };
  const controls = new Map<string, FakeBaseControl>();

  const server = createFakeServer(core);
  const { port, url } = await listen(server, options.port ?? 0, host);
  world.url = url;

  const stats = core.stats;
  return {
    url,
    port,
    faults: core.faults,
    stats: {
      get requests() {
        return stats.requests;
      },
      get rateLimited() {
        return stats.rateLimited;
      },
      byBase: (baseId) => stats.byBase(baseId),
      refusals: () => [...stats.refusals.refusals],
      reset: () => {
        stats.reset();
        core.limiters?.base.reset();
        core.limiters?.user.reset();
      },
    },
    addToken: (token, grant) => core.tokens.add(token, grant).id,
    revokeToken: (token) => core.tokens.revoke(token),
    advanceClock: (ms) => {
      skew += ms;
    },
    webhookSecret: (id) => core.webhooks.secretOf(id),
    createBase: (input) => {
      const id = input.id ?? randomId('app');
      if (!/^app[0-9A-Za-z]{14}$/.test(id)) throw new Error(`base id ${id} does not look like app + 14 characters`);
      if (world.bases.has(id)) throw new Error(`base ${id} exists`);
      const model = { id, name: input.name, tables: [], transactionNumber: 0 };
      world.bases.set(id, model);
      const control = new FakeBaseControl(core, model);
      controls.set(id, control);
      return control;
    },
    base: (id) => {
      const control = controls.get(id);
      if (!control) throw new Error(`no base ${id}`);
      return control;
    },
    close: async () => {
      core.webhooks.close();
      await closeServer(server);
    },
  };
}
