import Airtable from 'airtable';
import pg from 'pg';
import Stripe from 'stripe';
import { pause } from '../../src/time.ts';
import type { Pacer } from '../pacer.ts';
import type { Random } from '../random.ts';
import { OpCounts, type TrafficActor, type Violation } from '../types.ts';

/**
 * Client traffic: a customer's own backend writing through the proxy with the official
 * clients, and writing upstream directly then calling the wait endpoint. Each write carries
 * a sequence number; right after the proxy's answer, or the wait's `ok`, the row must show
 * that number or a later one (read-after-write), and a deleted record must be gone.
 */
export interface ClientOptions {
  random: Random;
  pacer: Pacer;
  /** The sync's database, as its read-only role. */
  reader: pg.Pool;
  /** `GET {api}/api/wait/:id` with the account's token; true when it answered ok. */
  wait(): Promise<boolean>;
  /**
   * Whether an upstream event about the record was listed only after `atMs` (Stripe's late
   * events): a wait sent at `atMs` could not see it, and the change must arrive by itself.
   */
  listedAfter?(id: string, atMs: number): Promise<boolean>;
  /**
   * Until when a fault may hold the syncs' feeds still (faults.ts, HOLDS_THE_FEEDS): the end of
   * the latest such fault, grace included, or now while one is under way.
   */
  heldUntil?(): number;
  violations: Violation[];
  log(message: string): void;
}

/**
 * How soon a change whose event Stripe listed late is in the database, from the wait that
 * could not see it, or from the end of a fault that held the feed still: the longest delay the
 * simulation makes (10 s), the feed's window read (every 5 s) and a margin for a busy machine.
 * (Seed 8499, one run in four, counted it from the wait alone: a control database hang came
 * just after, and while it lasts no request is granted, for up to 20 s and a 30 s statement
 * deadline.)
 */
const LATE_BOUND_MS = 30_000;

/** One record's sequence of writes: what the database must show at least. */
interface Tracked {
  id: string;
  seq: number;
}

abstract class ClientActor implements TrafficActor {
  readonly counts = new OpCounts();
  /** Reads checked after an answer, and how many found an older row. */
  checked = 0;
  doing: string | undefined;
  private readonly records: Tracked[] = [];
  /** The traffic's end: a late change still awaited then is left to the final db=upstream check. */
  private stopped: AbortSignal | undefined;

  constructor(
    readonly name: string,
    protected readonly options: ClientOptions,
  ) {}

  /** The sequence number the database holds for a record; undefined when it has no row. */
  protected abstract readSeq(id: string): Promise<number | undefined>;
  protected abstract create(seq: number, proxied: boolean): Promise<string>;
  protected abstract update(id: string, seq: number, proxied: boolean): Promise<void>;
  protected abstract remove(id: string, proxied: boolean): Promise<void>;

  /**
   * After a write was answered (or waited for): the row shows it, or a later one. `waitSentAt`:
   * a wait's ok, which cannot cover an event the upstream listed only after the wait was sent
   * (docs/stripe.md, "Events Stripe lists late"); such a change must arrive within LATE_BOUND_MS.
   */
  private async expect(what: string, id: string, seq: number | 'gone', waitSentAt?: number): Promise<void> {
    this.checked++;
    this.doing = `reading ${id} back after ${what}`;
    const held = await this.readSeq(id);
    const older = (h: number | undefined) => (seq === 'gone' ? h !== undefined : h === undefined || h < seq);
    if (older(held) && waitSentAt !== undefined && (await this.options.listedAfter?.(id, waitSentAt))) {
      this.counts.ok('wait.ok before a late event was listed');
      this.doing = `waiting for ${id}'s change, listed late`;
      const deadline = () => Math.max(waitSentAt, this.options.heldUntil?.() ?? 0) + LATE_BOUND_MS;
      let now = held;
      while (older(now) && Date.now() < deadline() && !this.stopped?.aborted) {
        await pause(250);
        now = await this.readSeq(id);
      }
      if (!older(now)) return;
      if (this.stopped?.aborted) {
        this.counts.ok('late change left to the final check');
        return;
      }
      this.options.violations.push({
        check: 'late event applied',
        detail: `${this.name}: ${id} (seq ${seq}) was changed by an event Stripe listed late, and ${LATE_BOUND_MS / 1000} s after the wait (and any fault that held the feed) the database still showed ${now === undefined ? 'no row' : `seq ${now}`}`,
      });
      return;
    }
    if (older(held)) {
      this.options.violations.push({
        check: 'read-after-write',
        detail: `${this.name}: after ${what} of ${id} (seq ${seq}) the database showed ${held === undefined ? 'no row' : `seq ${held}`}`,
      });
    }
  }

  /**
   * One write, within the client's share (its slot counts from the answer). A write whose
   * answer is an error (a fault, a kill) has no known outcome: not checked.
   */
  private async attempt(kind: string, write: () => Promise<void>, signal: AbortSignal): Promise<boolean> {
    const answered = await this.options.pacer.take(signal);
    this.doing = kind;
    try {
      await write();
      this.counts.ok(kind);
      return true;
    } catch {
      this.counts.no(kind);
      return false;
    } finally {
      answered();
    }
  }

  async run(signal: AbortSignal): Promise<void> {
    this.stopped = signal;
    const { random } = this.options;
    let seq = 0;
    while (!signal.aborted) {
      try {
        const op = this.records.length < 3 ? 'create' : random.weighted({ create: 2, update: 5, direct: 3, remove: 1 });
        if (op === 'create') {
          // Created through the proxy and updated at once: the update must not be overtaken.
          let id = '';
          if (!(await this.attempt('proxy.create', async () => void (id = await this.create(++seq, true)), signal))) continue;
          await this.expect('a proxied create', id, seq);
          const record = { id, seq };
          this.records.push(record);
          const next = ++seq;
          if (await this.attempt('proxy.update', () => this.update(id, next, true), signal)) {
            record.seq = next;
            await this.expect('a proxied update right after the create', id, next);
          }
        } else if (op === 'update') {
          const record = random.pick(this.records);
          const next = ++seq;
          if (await this.attempt('proxy.update', () => this.update(record.id, next, true), signal)) {
            record.seq = next;
            await this.expect('a proxied update', record.id, next);
          }
        } else if (op === 'direct') {
          const record = random.pick(this.records);
          const next = ++seq;
          if (await this.attempt('direct.update', () => this.update(record.id, next, false), signal)) {
            record.seq = next;
            this.doing = 'waiting for the sync (the wait endpoint)';
            const sentAt = Date.now();
            const ok = await this.options.wait().catch(() => false);
            if (ok) {
              this.counts.ok('wait.ok');
              await this.expect("the wait endpoint's ok after a direct update", record.id, next, sentAt);
            } else this.counts.no('wait.ok');
          }
        } else {
          const record = this.records.splice(random.int(this.records.length), 1)[0]!;
          if (await this.attempt('proxy.delete', () => this.remove(record.id, true), signal)) await this.expect('a proxied delete', record.id, 'gone');
        }
      } catch (error) {
        if (signal.aborted) return;
        this.options.log(`${this.name}: ${(error as Error).message}`);
      }
      await pause(100 + random.int(400), signal);
    }
  }
}

/**
 * One airtable.js call, bounded as a whole. Its `requestTimeout` ends when the headers arrive:
 * an answer cut short after them (a dropped connection) leaves the body read, and the call,
 * unsettled for ever. Rejections are plain objects; made Errors.
 */
async function airtableJs<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`airtable.js: no whole answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } catch (thrown) {
    throw thrown instanceof Error ? thrown : new Error(`airtable.js: ${JSON.stringify(thrown)}`);
  } finally {
    clearTimeout(timer);
  }
}

export interface AirtableClientOptions extends ClientOptions {
  token: string;
  baseId: string;
  proxyUrl: string;
  upstreamUrl: string;
  /** The upstream table the client owns, with a `Name` and a number field `Seq`. */
  table: string;
  /** Its table and the `Seq` column in the database. */
  dbTable: string;
  seqColumn: string;
  /** How long one write may take, answer read included (default 20 s). */
  requestTimeoutMs?: number;
}

export class AirtableClient extends ClientActor {
  private readonly proxied: Airtable.Base;
  private readonly direct: Airtable.Base;
  private readonly timeoutMs: number;

  constructor(private readonly airtable: AirtableClientOptions) {
    super('airtable client', airtable);
    this.timeoutMs = airtable.requestTimeoutMs ?? 20_000;
    const base = (endpointUrl: string) =>
      new Airtable({ apiKey: airtable.token, endpointUrl, noRetryIfRateLimited: true, requestTimeout: this.timeoutMs }).base(airtable.baseId);
    this.proxied = base(`${airtable.proxyUrl}/api.airtable.com`);
    this.direct = base(airtable.upstreamUrl);
  }

  protected async readSeq(id: string): Promise<number | undefined> {
    const { rows } = await this.airtable.reader.query<{ seq: string | null }>(
      `SELECT ${pg.escapeIdentifier(this.airtable.seqColumn)}::text AS seq FROM public.${pg.escapeIdentifier(this.airtable.dbTable)} WHERE id = $1`,
      [id],
    );
    return rows.length === 0 ? undefined : Number(rows[0]!.seq ?? -1);
  }

  protected async create(seq: number, proxied: boolean): Promise<string> {
    const table = (proxied ? this.proxied : this.direct)(this.airtable.table);
    const made = await airtableJs(table.create({ Name: `Order ${seq}`, Seq: seq }), this.timeoutMs);
    return made.id;
  }

  protected async update(id: string, seq: number, proxied: boolean): Promise<void> {
    const table = (proxied ? this.proxied : this.direct)(this.airtable.table);
    await airtableJs(table.update(id, { Name: `Order ${seq}`, Seq: seq }), this.timeoutMs);
  }

  protected async remove(id: string, proxied: boolean): Promise<void> {
    await airtableJs((proxied ? this.proxied : this.direct)(this.airtable.table).destroy(id), this.timeoutMs);
  }
}

export interface StripeClientOptions extends ClientOptions {
  key: string;
  proxyPort: number;
  upstreamUrl: string;
}

export class StripeClient extends ClientActor {
  private readonly proxied: Stripe;
  private readonly direct: Stripe;

  constructor(private readonly stripe: StripeClientOptions) {
    super('stripe client', stripe);
    const upstream = new URL(stripe.upstreamUrl);
    this.proxied = new Stripe(stripe.key, { host: '127.0.0.1', port: stripe.proxyPort, protocol: 'http', maxNetworkRetries: 0, timeout: 20_000 });
    this.direct = new Stripe(stripe.key, { host: upstream.hostname, port: Number(upstream.port), protocol: 'http', maxNetworkRetries: 0, timeout: 20_000 });
  }

  protected async readSeq(id: string): Promise<number | undefined> {
    const { rows } = await this.stripe.reader.query<{ seq: string | null }>("SELECT metadata->>'seq' AS seq FROM public.customer WHERE id = $1", [id]);
    return rows.length === 0 ? undefined : Number(rows[0]!.seq ?? -1);
  }

  protected async create(seq: number, proxied: boolean): Promise<string> {
    const made = await (proxied ? this.proxied : this.direct).customers.create({
      name: `Client ${seq}`,
      email: `client${seq}@example.com`,
      metadata: { seq: String(seq) },
    });
    return made.id;
  }

  protected async update(id: string, seq: number, proxied: boolean): Promise<void> {
    await (proxied ? this.proxied : this.direct).customers.update(id, { name: `Client ${seq}`, metadata: { seq: String(seq) } });
  }

  protected async remove(id: string, proxied: boolean): Promise<void> {
    await (proxied ? this.proxied : this.direct).customers.del(id);
  }
}
