import pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { FailureCount } from '../retry.ts';
import { closeClient } from './close-client.ts';

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
  /**
   * Between heartbeats, and how long one may go unanswered (default 10 s): a connection whose
   * heartbeat goes unanswered is replaced.
   */
  heartbeatMs?: number;
}

/** See ListenOptions.heartbeatMs. */
export const LISTEN_HEARTBEAT_MS = 10_000;

/**
 * One LISTEN connection that comes back after it is lost, at a steady pace (the retry policy's
 * back-off with no growth).
 * While the connection is down, `listening` is false: users that poll on a timer as well fall
 * back to it; a notification sent meanwhile (a wait marker reached) is not sent again.
 * A LISTEN connection only ever receives, so a path that stops passing bytes without closing
 * would leave it listening to nothing for good, `listening` true: a heartbeat finds it out.
 */
export class ListenConnection {
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly failures: FailureCount;
  private heartbeat: NodeJS.Timeout | undefined;

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
    const every = this.options.heartbeatMs ?? LISTEN_HEARTBEAT_MS;
    // Connecting and listening have the heartbeat's deadline too: over a hung path they would never end.
    const client = new pg.Client({ connectionString: this.options.url, connectionTimeoutMillis: every, query_timeout: every });
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
    this.beat(client, every);
    this.options.onListening?.();
  }

  /** Asks the server for an answer every `every` ms; one that does not come in time replaces the connection. */
  private beat(client: pg.Client, every: number): void {
    let inFlight = false;
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      if (inFlight || this.client !== client) return;
      inFlight = true;
      client
        .query('SELECT 1')
        .then(
          () => undefined,
          (error: unknown) => {
            if (this.client !== client) return;
            this.options.logger.warn(
              { err: toError(error), heartbeat_ms: every },
              `${this.options.what} connection silent: a heartbeat went unanswered; reconnecting`,
            );
            this.reconnectLater();
          },
        )
        .finally(() => (inFlight = false));
    }, every);
    this.heartbeat.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    clearInterval(this.heartbeat);
    const client = this.client;
    this.client = undefined;
    if (client) await closeClient(client);
  }

  private reconnectLater(): void {
    const old = this.client;
    this.client = undefined;
    clearInterval(this.heartbeat);
    if (old) void closeClient(old);
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.stopped) return;
      this.start().catch(() => this.reconnectLater());
    }, this.failures.next());
  }
}
