import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OpCounts, type TrafficActor, type Violation } from '../types.ts';
import type { HostReady, HostRequest, HostSetUp, UpstreamFault, UpstreamStats, UserCounts } from './protocol.ts';
import type { LateEventsSetting } from '../../fakes/stripe/index.ts';

const HOST = path.join(path.dirname(fileURLToPath(import.meta.url)), 'host.ts');
const ROOT = path.resolve(path.dirname(HOST), '..', '..');

/** One upstream's process (host.ts says why), and what the simulation asks of it. */
class UpstreamHost implements HostReady {
  private nextId = 0;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  private readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    ready: HostReady,
  ) {
    this.stripeUrl = ready.stripeUrl;
    this.airtableUrl = ready.airtableUrl;
    this.stripeAccount = ready.stripeAccount;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.on('message', (message: { id?: number; result?: unknown; error?: string }) => {
      if (message.id === undefined) return;
      const waiting = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error !== undefined) waiting?.reject(new Error(`upstreams: ${message.error}`));
      else waiting?.resolve(message.result);
    });
    child.once('exit', (code) => {
      for (const waiting of this.pending.values()) waiting.reject(new Error(`the upstreams' process exited (${code})`));
      this.pending.clear();
    });
  }

  readonly stripeUrl: string;
  readonly airtableUrl: string;
  readonly stripeAccount: string;

  static async start(setUp: HostSetUp, log: (line: string) => void): Promise<UpstreamHost> {
    const child = fork(HOST, [JSON.stringify(setUp)], {
      cwd: ROOT,
      execArgv: ['--import', 'tsx'],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ready = await new Promise<HostReady>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the upstreams' process exited (${code}) before it was ready`)));
      child.on('message', (message: { ready?: HostReady; log?: string }) => {
        if (message.ready) resolve(message.ready);
        if (message.log) log(message.log);
      });
    });
    return new UpstreamHost(child, ready);
  }

  private call<T>(request: HostRequest): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.send({ id, ...request });
    });
  }

  addFault(fault: UpstreamFault): Promise<void> {
    return this.call({ op: 'fault', fault });
  }

  clearFaults(): Promise<void> {
    return this.call({ op: 'clear-faults' });
  }

  lateEvents(setting: LateEventsSetting | null): Promise<void> {
    return this.call({ op: 'late-events', setting });
  }

  listedAfter(object: string, atMs: number): Promise<boolean> {
    return this.call({ op: 'listed-after', object, atMs });
  }

  silentEdits(count: number, seed: number): Promise<string[]> {
    return this.call({ op: 'silent-edits', count, seed });
  }

  stats(): Promise<UpstreamStats> {
    return this.call({ op: 'stats' });
  }

  /** The account's or base's rows compared with a sync database (check/*-upstream.ts). */
  matches(kind: 'stripe' | 'airtable', databaseUrl: string, settings?: Record<string, unknown>): Promise<Violation[]> {
    return this.call({ op: 'check', kind, databaseUrl, settings });
  }

  /** The Airtable UI users (traffic/airtable.ts), running beside the base, as one actor. */
  airtableUsers(salt: number): TrafficActor {
    const counts = new OpCounts();
    const actor = {
      name: 'airtable users',
      counts,
      doing: undefined as string | undefined,
      run: async (signal: AbortSignal) => {
        await this.call({ op: 'users-start', salt });
        await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
        actor.doing = 'stopping (the upstream process ends their edits)';
        const { done, refused } = await this.call<UserCounts>({ op: 'users-stop' });
        for (const [kind, n] of done) counts.done.set(kind, (counts.done.get(kind) ?? 0) + n);
        for (const [kind, n] of refused) counts.refused.set(kind, (counts.refused.get(kind) ?? 0) + n);
      },
    };
    return actor;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    await this.call({ op: 'close' }).catch(() => undefined);
    await this.exited;
  }
}

/** The simulation's upstreams: Stripe and Airtable, each in a process of its own. */
export class Upstreams implements HostReady {
  private constructor(
    private readonly stripe: UpstreamHost,
    private readonly airtable: UpstreamHost,
  ) {}

  static async start(setUp: Omit<HostSetUp, 'only'>, log: (line: string) => void): Promise<Upstreams> {
    const [stripe, airtable] = await Promise.all([
      UpstreamHost.start({ ...setUp, only: 'stripe' }, log),
      UpstreamHost.start({ ...setUp, only: 'airtable' }, log),
    ]);
    return new Upstreams(stripe, airtable);
  }

  get stripeUrl(): string {
    return this.stripe.stripeUrl;
  }

  get airtableUrl(): string {
    return this.airtable.airtableUrl;
  }

  get stripeAccount(): string {
    return this.stripe.stripeAccount;
  }

  addFault(fault: UpstreamFault): Promise<void> {
    return (fault.upstream === 'stripe' ? this.stripe : this.airtable).addFault(fault);
  }

  async clearFaults(): Promise<void> {
    await Promise.all([this.stripe.clearFaults(), this.airtable.clearFaults()]);
  }

  /** Stripe lists a share of its events late (the fake's eventual consistency); null: none. */
  stripeLateEvents(setting: LateEventsSetting | null): Promise<void> {
    return this.stripe.lateEvents(setting);
  }

  /** Stripe renames `count` customers with no event (only the audit can find it); their ids. */
  stripeSilentEdits(count: number, seed: number): Promise<string[]> {
    return this.stripe.silentEdits(count, seed);
  }

  /** Whether an event about the Stripe object was listed only after `atMs` (a wait then could not see it). */
  stripeListedAfter(object: string, atMs: number): Promise<boolean> {
    return this.stripe.listedAfter(object, atMs);
  }

  async stats(): Promise<UpstreamStats> {
    const [stripe, airtable] = await Promise.all([this.stripe.stats(), this.airtable.stats()]);
    return {
      stripe: stripe.stripe,
      airtable: airtable.airtable,
      refusals: [...stripe.refusals, ...airtable.refusals],
      loopDelayMs: { p99: Math.max(stripe.loopDelayMs.p99, airtable.loopDelayMs.p99), max: Math.max(stripe.loopDelayMs.max, airtable.loopDelayMs.max) },
    };
  }

  matches(kind: 'stripe' | 'airtable', databaseUrl: string, settings?: Record<string, unknown>): Promise<Violation[]> {
    return (kind === 'stripe' ? this.stripe : this.airtable).matches(kind, databaseUrl, settings);
  }

  airtableUsers(salt: number): TrafficActor {
    return this.airtable.airtableUsers(salt);
  }

  async close(): Promise<void> {
    await Promise.all([this.stripe.close(), this.airtable.close()]);
  }
}
