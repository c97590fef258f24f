import { SYNC_READY_CHANNEL } from '../control/syncs.ts';
import { ListenConnection } from '../db/listen.ts';
import type { Logger } from '../log.ts';
import { PASS_WANTED_CHANNEL, PASSES_CHANNEL, PING_CHANNEL, type PassCompletions, type PassRequests } from './passes.ts';
import { Wakeups } from './wakeups.ts';

/** Pinged parts kept per process until a runner takes them: a bound, since most syncs are run elsewhere. */
const MAX_PINGED_SYNCS = 10_000;
const MAX_PARTS_PER_SYNC = 1_000;

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
  /** The parts pings named, by sync, until the runner takes them. */
  private readonly parts = new Map<string, Set<string>>();
  private readonly stopping = new AbortController();
  private readonly connection: ListenConnection;
  private readonly readyListeners: Array<() => void> = [];

  constructor(options: { url: string; logger: Logger; reconnectMs?: number; heartbeatMs?: number }) {
    this.connection = new ListenConnection({
      ...options,
      channels: [PASS_WANTED_CHANNEL, PASSES_CHANNEL, PING_CHANNEL, SYNC_READY_CHANNEL],
      what: 'pass signal',
      onNotification: (channel, payload) => {
        if (channel === PASS_WANTED_CHANNEL) this.requests.bump(payload);
        if (channel === PASSES_CHANNEL) this.completions.bump(payload);
        if (channel === SYNC_READY_CHANNEL) for (const listener of this.readyListeners) listener();
        if (channel === PING_CHANNEL) {
          const [syncId, part] = payload.split(' ', 2) as [string, string | undefined];
          if (part) this.notePart(syncId, part);
          // Counted as a ping first, so a runner woken by it finds it counted. A ping that names
          // a part wakes only the reader of that part (which waits on pings), not the whole runner.
          this.pings.bump(syncId);
          if (!part) this.requests.bump(syncId);
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

  /** Calls `listener` whenever a sync is made ready to run, by any process. */
  onSyncReady(listener: () => void): void {
    this.readyListeners.push(listener);
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

  pingedSince(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.pings.since(syncId, mark, timeoutMs, signal);
  }

  takePingedParts(syncId: string): string[] {
    const parts = this.parts.get(syncId);
    this.parts.delete(syncId);
    return parts ? [...parts] : [];
  }

  /** Kept until taken; bounded, since a sync nobody runs here never takes them. */
  private notePart(syncId: string, part: string): void {
    if (!this.parts.has(syncId) && this.parts.size >= MAX_PINGED_SYNCS) this.parts.delete(this.parts.keys().next().value!);
    const parts = this.parts.get(syncId) ?? new Set<string>();
    if (parts.size < MAX_PARTS_PER_SYNC) parts.add(part);
    this.parts.set(syncId, parts);
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
