import pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { FailureCount } from '../retry.ts';

export interface ListenOptions {
  /** The control database. */
  url: string;
  channels: string[];
  /** What the connection is for, in log lines ("event bus", "pass signal"). */
  what: string;
  logger: Logger;
  onNotification(channel: string, payload: string): void;
  /** Each time the connection is (again) listening: what was sent meanwhile was missed. */
  onListening?(): void;
  /** The wait before each reconnect (default 1 s). */
  reconnectMs?: number;
}

/**
 * One LISTEN connection that comes back after it is lost, at a steady pace (the retry policy's
 * back-off with no growth).
 * While the connection is down, `listening` is false: users that poll on a timer as well fall
 * back to it; a notification sent meanwhile (a wait marker reached) is not sent again.
 */
export class ListenConnection {
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly failures: FailureCount;

  constructor(private readonly options: ListenOptions) {
    // Not growing: a notification sent while nobody listens is lost (a wait marker reached
    // meanwhile answers its waiter only by timeout), so the connection comes back as soon as
    // it can, at the same pace however long the database was away.
    const every = options.reconnectMs ?? 1000;
    this.failures = new FailureCount({ initialMs: every, maxMs: every });
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Connects and listens; throws when the first connection fails (later ones are retried). */
  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.url });
    client.on('notification', (message) => {
      if (message.payload) this.options.onNotification(message.channel, message.payload);
    });
    client.on('error', (err) => {
      // Only the current connection's loss matters: one that failed to start was ended below.
      if (this.client !== client) return;
      this.options.logger.warn({ err: toError(err) }, `${this.options.what} connection lost; reconnecting`);
      this.reconnectLater();
    });
    try {
      await client.connect();
      await client.query(this.options.channels.map((channel) => `LISTEN ${channel}`).join('; '));
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.failures.reset();
    this.options.onListening?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private reconnectLater(): void {
    const old = this.client;
    this.client = undefined;
    old?.end().catch(() => undefined);
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.stopped) return;
      this.start().catch(() => this.reconnectLater());
    }, this.failures.next());
  }
}
