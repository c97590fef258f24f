import { ListenConnection } from '../db/listen.ts';
import type { Logger } from '../log.ts';
import type { LoggedEvent } from './log.ts';
import { LoggedFeed } from './logged-feed.ts';

/** The channel the decoder NOTIFYs, in the transaction that logs events, with payload `<sync_id>`. */
export const EVENTS_CHANNEL = 'tributary_events';
/** The channel the decoder NOTIFYs when it has reached a wait marker, with the marker's token. */
export const WAITS_CHANNEL = 'tributary_waits';

type Listener = () => void;

/**
 * Wakes readers of the event log (REST long polls, webhook deliverers, the Kafka relay)
 * when a sync's decoder has logged new events, in this process or any other: LISTEN on
 * one connection per process. A notification is only a hint; readers read the log, except
 * that readers beside the sync's decoder (relay, webhook deliverer) are handed what it has
 * just committed (subscribeLogged) and read the log only when that does not suffice.
 *
 * To wait without missing an event that lands between a read and the wait, a reader takes
 * `mark(syncId)` before reading and passes it to `changedSince`.
 */
export class EventBus {
  private readonly counters = new Map<string, number>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly tokens = new Map<string, () => void>();
  private readonly feeds = new Map<string, Set<LoggedFeed>>();
  private stopped = false;
  private readonly connection: ListenConnection;

  constructor(options: { url: string; logger: Logger; reconnectMs?: number; heartbeatMs?: number }) {
    this.connection = new ListenConnection({
      ...options,
      channels: [EVENTS_CHANNEL, WAITS_CHANNEL],
      what: 'event bus',
      onNotification: (channel, payload) => {
        if (channel === EVENTS_CHANNEL) this.publish(payload);
        if (channel === WAITS_CHANNEL) this.tokens.get(payload)?.();
      },
      // Whatever was logged while we were not listening: wake everyone once.
      onListening: () => {
        for (const syncId of this.listeners.keys()) this.publish(syncId);
      },
    });
  }

  start(): Promise<void> {
    return this.connection.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.connection.stop();
    for (const set of this.listeners.values()) for (const wake of set) wake();
  }

  /** New events were logged for a sync (called by the decoder in-process, and on NOTIFY). */
  publish(syncId: string): void {
    this.counters.set(syncId, (this.counters.get(syncId) ?? 0) + 1);
    for (const wake of this.listeners.get(syncId) ?? []) wake();
  }

  /**
   * This process's decoder committed `events` (in seq order) for a sync: readers here get
   * them through their feeds, then everyone is woken as by publish().
   */
  publishLogged(syncId: string, events: LoggedEvent[]): void {
    for (const feed of this.feeds.get(syncId) ?? []) feed.push(events);
    this.publish(syncId);
  }

  /** The sync's decoder (re)starts here: feeds forget what they held, and readers look at the log. */
  forgetLogged(syncId: string): void {
    for (const feed of this.feeds.get(syncId) ?? []) feed.reset();
    this.publish(syncId);
  }

  /** A feed of what this process's decoder logs for a sync from now on (logged-feed.ts); close it when done. */
  subscribeLogged(syncId: string, maxEvents: number | (() => number) = 10_000): LoggedFeed {
    const set = this.feeds.get(syncId) ?? new Set<LoggedFeed>();
    this.feeds.set(syncId, set);
    const feed = new LoggedFeed(maxEvents, (closed) => {
      set.delete(closed);
      if (set.size === 0 && this.feeds.get(syncId) === set) this.feeds.delete(syncId);
    });
    set.add(feed);
    return feed;
  }

  mark(syncId: string): number {
    return this.counters.get(syncId) ?? 0;
  }

  /** Resolves true once the sync has news after `mark`, false on timeout or abort. */
  changedSince(syncId: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.mark(syncId) !== mark) return Promise.resolve(true);
    if (timeoutMs <= 0 || signal?.aborted || this.stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const set = this.listeners.get(syncId) ?? new Set<Listener>();
      this.listeners.set(syncId, set);
      const done = (changed: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        set.delete(wake);
        if (set.size === 0) this.listeners.delete(syncId);
        resolve(changed);
      };
      const wake = () => done(this.mark(syncId) !== mark);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      set.add(wake);
    });
  }

  /**
   * Resolves true when some decoder reports `token` reached (src/decoder/wait.ts), false
   * on timeout. Register before the marker is written, so the answer cannot be missed.
   */
  tokenReached(token: string, timeoutMs: number): { reached: Promise<boolean>; cancel(): void } {
    let finish: (reached: boolean) => void = () => undefined;
    const reached = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), timeoutMs);
      finish = (value) => {
        clearTimeout(timer);
        this.tokens.delete(token);
        resolve(value);
      };
      this.tokens.set(token, () => finish(true));
    });
    return { reached, cancel: () => finish(false) };
  }

  /** Like changedSince for several syncs at once (a REST consumer on many topics). */
  async changedSinceAny(marks: Map<string, number>, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if ([...marks].some(([syncId, mark]) => this.mark(syncId) !== mark)) return true;
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const results = await Promise.race([...marks].map(([syncId, mark]) => this.changedSince(syncId, mark, timeoutMs, controller.signal)));
      return results;
    } finally {
      controller.abort();
      signal?.removeEventListener('abort', onAbort);
    }
  }
}
