import pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { PASS_WANTED_CHANNEL, PASSES_CHANNEL, type PassCompletions, type PassRequests } from './passes.ts';
import { Wakeups } from './wakeups.ts';

/**
 * One LISTEN connection per process on the control database for the wait endpoint: wait
 * requests wake the sync's runner (PASS_WANTED_CHANNEL) and completed passes wake the
 * waiters (PASSES_CHANNEL), in this process or any other. A notification is only a hint:
 * both sides always read the control database; while the connection is down, `listening`
 * is false and they fall back to their timers.
 */
export class PassSignals implements PassRequests, PassCompletions {
  private readonly requests = new Wakeups();
  private readonly completions = new Wakeups();
  private readonly stopping = new AbortController();
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;

  constructor(private readonly options: { url: string; logger: Logger; reconnectMs?: number }) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.url });
    client.on('notification', (message) => {
      if (!message.payload) return;
      if (message.channel === PASS_WANTED_CHANNEL) this.requests.bump(message.payload);
      if (message.channel === PASSES_CHANNEL) this.completions.bump(message.payload);
    });
    client.on('error', (err) => {
      this.options.logger.warn({ err: toError(err) }, 'pass signal connection lost; reconnecting');
      this.reconnectLater();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${PASS_WANTED_CHANNEL}; LISTEN ${PASSES_CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.stopping.signal.aborted) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    // Whatever was sent while nobody listened: everyone waiting looks again.
    this.requests.bumpWaiting();
    this.completions.bumpWaiting();
  }

  async stop(): Promise<void> {
    this.stopping.abort(new Error('the service is shutting down'));
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** Aborted when the process shuts down: long waits end instead of holding the listener open. */
  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  requestMark(syncId: string): number {
    return this.requests.mark(syncId);
  }

  requestedSince(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.requests.since(syncId, mark, timeoutMs, signal);
  }

  completedMark(syncId: string): number {
    return this.completions.mark(syncId);
  }

  completedSince(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.completions.since(syncId, mark, timeoutMs, signal);
  }

  private reconnectLater(): void {
    const old = this.client;
    this.client = undefined;
    old?.end().catch(() => undefined);
    if (this.stopping.signal.aborted || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.stopping.signal.aborted) return;
      this.start().catch(() => this.reconnectLater());
    }, this.options.reconnectMs ?? 1000);
  }
}
