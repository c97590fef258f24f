import type { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import pg from 'pg';
import { closeClient } from '../db/close-client.ts';
import { connectionConfig } from '../db/connect.ts';
import { formatLsn, lsnToBigInt } from './pgoutput.ts';

/** What a replication session calls, in the order the server sent it. */
export interface ReplicationHandlers {
  /**
   * One XLogData payload (a pgoutput message). A returned promise holds the stream back:
   * nothing later is handed over, and the socket is paused, until it settles.
   */
  data(payload: Buffer): Promise<void> | undefined;
  /** A primary keepalive, handed over as it arrives (ahead of data still held back). */
  keepalive(walEnd: string, replyRequested: boolean): void;
}

export interface ReplicationOptions {
  /** A URL whose role has the REPLICATION right. */
  databaseUrl: string;
  /** Session settings (`-c name=value …`). */
  options?: string;
  /** The START_REPLICATION command. */
  command: string;
  /** A replication command run first on the same connection (e.g. ALTER_REPLICATION_SLOT). */
  before?: string;
  handlers: ReplicationHandlers;
  /**
   * A session from which nothing has come for this long, while nothing here holds it back,
   * is taken as a hung path and failed (default 30 s); a third of it in, the server is pinged.
   */
  silenceMs?: number;
}

/** See ReplicationOptions.silenceMs. */
export const REPLICATION_SILENCE_MS = 30_000;

/** The parts of pg's connection a replication session uses; pg's typings leave them out. */
interface CopyConnection extends EventEmitter {
  stream: Duplex;
  sendCopyFromChunk(chunk: Buffer): void;
}

/** Microseconds from the Unix epoch to PostgreSQL's (2000-01-01). */
const PG_EPOCH_US = 946_684_800_000_000n;

/**
 * One logical replication session over pg's protocol client: START_REPLICATION, then every
 * CopyData message straight to the handlers, and standby status updates back. The decoder's
 * hot path, so per message it does the least: no LSN text, no promise unless a handler made one.
 */
export class ReplicationStream {
  private client: pg.Client | undefined;
  private connection: CopyConnection | undefined;
  /** XLogData held back while a handler's promise is pending, in arrival order. */
  private readonly held: Buffer[] = [];
  private holding = false;
  private stopped = false;
  private failure: Error | undefined;
  /** Settles when the session is ended from here: resolves on stop(), rejects on fail(). */
  private readonly ended: Promise<void>;
  private end!: (error?: Error) => void;
  /** XLogData messages received so far (held back or handed over). */
  arrived = 0;
  /** When a message last came, or the stream was last released after holding back. */
  private heardAt = 0;
  /** A ping was sent since anything last came. */
  private pinged = false;
  /** The position last reported to the server (a ping repeats it; 0: none yet, which the server ignores). */
  private reported = 0n;
  private watch: NodeJS.Timeout | undefined;
  /** Given up for its silence: its server process (backendPid) may hold the slot a while yet. */
  silent = false;

  constructor(private readonly options: ReplicationOptions) {
    this.ended = new Promise<void>((resolve, reject) => {
      this.end = (error) => (error ? reject(error) : resolve());
    });
    this.ended.catch(() => undefined); // run() reports it; a session never run has no one to tell
  }

  /**
   * Connects and streams until stop() (resolves) or a failure: the server's, the
   * connection's, or one given to fail() (rejects with it).
   */
  async run(): Promise<void> {
    const client = new pg.Client({
      ...connectionConfig(this.options.databaseUrl),
      options: this.options.options,
      replication: 'database',
      connectionTimeoutMillis: 10_000,
      keepAlive: true,
    } as pg.ClientConfig);
    this.client = client;
    client.on('error', (error: Error) => this.fail(error));
    // Each step also ends with stop() or fail(): pg's connect() never settles once end() was
    // called during it, and a query's promise may outlive a socket destroyed under it.
    const connecting = client.connect();
    connecting.catch(() => undefined);
    await Promise.race([connecting, this.ended]);
    if (this.stopped) {
      if (this.failure) throw this.failure;
      return;
    }
    if (this.options.before) {
      const setup = client.query(this.options.before);
      setup.catch(() => undefined);
      await Promise.race([setup, this.ended]);
      if (this.stopped) {
        if (this.failure) throw this.failure;
        return;
      }
    }
    const connection = (client as unknown as { connection: CopyConnection }).connection;
    this.connection = connection;
    connection.on('copyData', (message: { chunk: Buffer }) => this.arrive(message.chunk));
    const streaming = client.query(this.options.command);
    streaming.catch(() => undefined);
    this.watchSilence();
    try {
      await Promise.race([streaming, this.ended]);
    } catch (error) {
      if (!this.stopped || this.failure) throw this.failure ?? error;
      return;
    } finally {
      clearInterval(this.watch);
    }
    if (this.failure) throw this.failure;
    if (!this.stopped) throw new Error('replication stream ended');
  }

  /** The session's server process (its WAL sender), once connected. */
  get backendPid(): number | undefined {
    return (this.client as { processID?: number | null } | undefined)?.processID ?? undefined;
  }

  /** Ends the session; run() resolves. */
  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.end();
    }
    this.held.length = 0;
    await this.close();
  }

  /** Ends the session with `error`; run() rejects with it. */
  fail(error: Error): void {
    if (this.failure || this.stopped) return;
    this.failure = error;
    this.stopped = true;
    this.end(error);
    this.held.length = 0;
    void this.close();
  }

  /**
   * Closes the connection, also one still being made (its socket is destroyed: end() would
   * wait for it). Over a hung path the server's goodbye never comes, so end() has a grace.
   */
  private async close(): Promise<void> {
    clearInterval(this.watch);
    if (this.client) await closeClient(this.client, this.connection !== undefined);
  }

  /**
   * A path that stops passing bytes without closing (a NAT that lost its state, a server that
   * stopped answering) leaves the socket open for as long as TCP retries, a quarter of an hour.
   * The server sends nothing while it has nothing to send and hears from us often enough, so
   * silence alone proves nothing: after a third of the bound, a status update asks it to
   * answer at once (the protocol's ping); with still nothing by the bound, the session fails
   * and the decoder starts another from the slot, losing nothing.
   */
  private watchSilence(): void {
    const bound = this.options.silenceMs ?? REPLICATION_SILENCE_MS;
    this.heardAt = Date.now();
    this.pinged = false;
    this.watch = setInterval(
      () => {
        if (this.stopped || this.holding) return;
        const silent = Date.now() - this.heardAt;
        if (silent >= bound) {
          this.silent = true;
          this.fail(new Error(`replication stream silent for ${Math.round(silent / 1000)} s, a ping unanswered: the path to the server hangs`));
        } else if (silent >= bound / 3 && !this.pinged) {
          this.pinged = true;
          this.send(this.reported, true);
        }
      },
      Math.max(50, Math.min(1000, bound / 10)),
    );
    this.watch.unref();
  }

  /**
   * Tells the server everything before `lsn` is durable here (written, flushed and applied:
   * the slot's confirmed position moves to it). `lsn` is an end position, as a commit's end
   * LSN and a keepalive's WAL end are. Exactly that, not a byte past it: a server shutting
   * down waits for each WAL sender's client to confirm precisely the position it sent, so a
   * position one past it kept `pg_ctl stop -m fast` waiting forever.
   */
  acknowledge(lsn: string): void {
    const connection = this.connection;
    if (!connection || this.stopped) return;
    this.reported = lsnToBigInt(lsn);
    this.send(this.reported, false);
  }

  /** A standby status update: everything before `position` written, flushed and applied. */
  private send(position: bigint, replyWanted: boolean): void {
    const connection = this.connection;
    if (!connection || this.stopped) return;
    const update = Buffer.alloc(34);
    update[0] = 0x72; // 'r'
    update.writeBigUInt64BE(position, 1); // written
    update.writeBigUInt64BE(position, 9); // flushed
    update.writeBigUInt64BE(position, 17); // applied
    update.writeBigInt64BE(BigInt(Date.now()) * 1000n - PG_EPOCH_US, 25);
    update[33] = replyWanted ? 1 : 0;
    connection.sendCopyFromChunk(update);
  }

  private arrive(chunk: Buffer): void {
    if (this.stopped) return;
    this.heardAt = Date.now();
    this.pinged = false;
    if (chunk[0] === 0x77 /* w: XLogData */) {
      this.arrived++;
      if (this.holding) this.held.push(chunk);
      else this.hand(chunk);
    } else if (chunk[0] === 0x6b /* k: primary keepalive */) {
      const walEnd = formatLsn(chunk.readUInt32BE(1), chunk.readUInt32BE(5));
      this.options.handlers.keepalive(walEnd, chunk[17] === 1);
    }
  }

  /** Hands one XLogData over (its header is 25 bytes); a pending handler holds the rest back. */
  private hand(chunk: Buffer): void {
    let pending: Promise<void> | undefined;
    try {
      pending = this.options.handlers.data(chunk.subarray(25));
    } catch (error) {
      this.fail(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (!pending) return;
    this.holding = true;
    this.connection?.stream.pause();
    pending.then(
      () => this.release(),
      (error: unknown) => this.fail(error instanceof Error ? error : new Error(String(error))),
    );
  }

  /** Hands over what was held back, until a handler is pending again or nothing is left. */
  private release(): void {
    this.holding = false;
    while (!this.holding && !this.stopped) {
      const next = this.held.shift();
      if (!next) break;
      this.hand(next);
    }
    if (!this.holding && !this.stopped) {
      // Time spent holding back is not the server's silence.
      this.heardAt = Date.now();
      this.pinged = false;
      this.connection?.stream.resume();
    }
  }
}
