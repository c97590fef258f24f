import { ListenConnection } from '../db/listen.ts';
import type { Logger } from '../log.ts';
import { PASS_WANTED_CHANNEL, PASSES_CHANNEL, PING_CHANNEL, type PassCompletions, type PassRequests } from './passes.ts';
import { Wakeups } from './wakeups.ts';

/**
 * One LISTEN connection per process on the control database for the wait endpoint: wait
 * requests and upstream pings wake the sync's runner (PASS_WANTED_CHANNEL, PING_CHANNEL) and
 * completed passes wake the waiters (PASSES_CHANNEL), in this process or any other. A notification is only a hint:
 * both sides always read the control database; while the connection is down, `listening`
 * is false and they fall back to their timers.
 */
export class PassSignals implements PassRequests, PassCompletions {
  private readonly requests = new Wakeups();
  /** Pings by sync, also counted in `requests` (nobody waits on these: they are only read). */
  private readonly pings = new Wakeups();
  private readonly completions = new Wakeups();
  private readonly stopping = new AbortController();
  private readonly connection: ListenConnection;

  constructor(options: { url: string; logger: Logger; reconnectMs?: number }) {
    this.connection = new ListenConnection({
      ...options,
      channels: [PASS_WANTED_CHANNEL, PASSES_CHANNEL, PING_CHANNEL],
      what: 'pass signal',
      onNotification: (channel, payload) => {
        if (channel === PASS_WANTED_CHANNEL) this.requests.bump(payload);
        if (channel === PASSES_CHANNEL) this.completions.bump(payload);
        if (channel === PING_CHANNEL) {
          // Counted as a ping first, so a runner woken by it finds it counted.
          this.pings.bump(payload);
          this.requests.bump(payload);
        }
      },
      // Whatever was sent while nobody listened: everyone waiting looks again.
      onListening: () => {
        this.requests.bumpWaiting();
        this.completions.bumpWaiting();
      },
    });
  }

  start(): Promise<void> {
    return this.connection.start();
  }

  async stop(): Promise<void> {
    this.stopping.abort(new Error('the service is shutting down'));
    await this.connection.stop();
  }

  /** Aborted when the process shuts down: long waits end instead of holding the listener open. */
  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  get listening(): boolean {
    return this.connection.listening;
  }

  requestMark(syncId: string): number {
    return this.requests.mark(syncId);
  }

  pingMark(syncId: string): number {
    return this.pings.mark(syncId);
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
}
