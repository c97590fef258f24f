import net from 'node:net';
import tls from 'node:tls';
import { MORE, ResponseParser } from './http1-response.ts';

/**
 * A small HTTP/1.1 client for webhook POSTs: keep-alive connections per origin, one request
 * at a time on each (no pipelining), the request written in one call, and a response parser
 * that keeps only the status, the framing headers and the first bytes of the body. It does
 * at a fraction of the CPU what node:http does, which matters at thousands of POSTs a second.
 *
 * What it does not do, on purpose: redirects (the caller reports a 3xx), compression,
 * proxies, pipelining, upgrades.
 */

/** Where requests go: one pool of connections per origin. */
export interface Origin {
  /** `http:` or `https:`. */
  protocol: string;
  /** For connect: the host name, or the IP address without brackets. */
  hostname: string;
  port: number;
  /** `protocol//host:port`, the pool's key. */
  key: string;
}

export type LookupFunction = NonNullable<net.TcpNetConnectOpts['lookup']>;

export interface Http1Options {
  /** Connections per origin at most; further requests wait for one. */
  maxSockets: number;
  /** The longest a connection stays idle for reuse (shortened to the server's Keep-Alive hint). */
  idleMs?: number;
  /** The longest a response's status line and headers may be. */
  maxHeaderBytes?: number;
  /** Name resolution for new connections (the public-address check). */
  lookup?: LookupFunction;
}

/** How one exchange ended: a complete (or deliberately cut) response, or a failure. */
export type Http1Result =
  | { status: number; body: Buffer; retryAfter?: string | undefined; error?: undefined }
  | { status?: undefined; body?: undefined; error: string };

/** One request and its response. */
export class Exchange {
  /** Some of the response has arrived (so a reused connection was not stale). */
  gotBytes = false;
  retried = false;
  done = false;
  connection: Connection | undefined;

  constructor(
    readonly origin: Origin,
    readonly payload: string,
    readonly maxBodyBytes: number,
    private readonly onDone: (result: Http1Result) => void,
  ) {}

  finish(result: Http1Result): void {
    if (this.done) return;
    this.done = true;
    this.connection = undefined;
    this.onDone(result);
  }
}

const DEFAULT_IDLE_MS = 30_000;
const RETRYABLE_ON_STALE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

export class Http1Pool {
  private readonly pools = new Map<string, OriginPool>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: Http1Options) {
    this.sweeper = setInterval(() => this.sweep(), 1_000);
    this.sweeper.unref();
  }

  /** Sends `exchange.payload` (request line, headers and body) on a connection to its origin. */
  dispatch(exchange: Exchange): void {
    if (this.closed) return exchange.finish({ error: 'stopped' });
    let pool = this.pools.get(exchange.origin.key);
    if (!pool) {
      pool = new OriginPool(exchange.origin, this.options);
      this.pools.set(exchange.origin.key, pool);
    }
    pool.dispatch(exchange);
  }

  /** Gives up on an exchange: out of the queue, or its connection closed. */
  cancel(exchange: Exchange, error: string): void {
    if (exchange.done) return;
    const connection = exchange.connection;
    if (connection) connection.destroy();
    else this.pools.get(exchange.origin.key)?.unqueue(exchange);
    exchange.finish({ error });
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const pool of this.pools.values()) pool.close();
    this.pools.clear();
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, pool] of this.pools) {
      pool.sweep(now);
      if (pool.isEmpty()) this.pools.delete(key);
    }
  }
}

class OriginPool {
  /** Idle connections, the most recently used last (reused first: the others may expire). */
  private readonly idle: Connection[] = [];
  private readonly waiting: Exchange[] = [];
  private readonly all = new Set<Connection>();
  private open = 0;
  private closed = false;
  /** The last TLS session, to resume on the next connection. */
  private session: Buffer | undefined;

  constructor(
    private readonly origin: Origin,
    private readonly options: Http1Options,
  ) {}

  dispatch(exchange: Exchange): void {
    const now = Date.now();
    for (let connection = this.idle.pop(); connection; connection = this.idle.pop()) {
      if (connection.usable(now)) return connection.start(exchange);
      connection.destroy();
    }
    if (this.open < this.options.maxSockets) return this.connect().start(exchange);
    this.waiting.push(exchange);
  }

  unqueue(exchange: Exchange): void {
    const index = this.waiting.indexOf(exchange);
    if (index >= 0) this.waiting.splice(index, 1);
  }

  /** A connection finished its exchange and may be reused. */
  release(connection: Connection): void {
    if (this.closed) return connection.destroy();
    const next = this.waiting.shift();
    if (next) return connection.start(next);
    connection.idleSince = Date.now();
    this.idle.push(connection);
  }

  /** A connection is gone; a waiting request may open a new one. */
  gone(connection: Connection): void {
    this.open -= 1;
    this.all.delete(connection);
    const index = this.idle.indexOf(connection);
    if (index >= 0) this.idle.splice(index, 1);
    if (!this.closed && this.waiting.length > 0 && this.open < this.options.maxSockets) this.connect().start(this.waiting.shift()!);
  }

  /** A request that failed on a reused connection before any answer: once more on a fresh one. */
  retry(exchange: Exchange): void {
    exchange.retried = true;
    if (this.closed) return exchange.finish({ error: 'stopped' });
    if (this.open < this.options.maxSockets) return this.connect().start(exchange);
    this.waiting.unshift(exchange);
  }

  sweep(now: number): void {
    for (const connection of [...this.idle]) if (!connection.usable(now)) connection.destroy();
  }

  isEmpty(): boolean {
    return this.open === 0 && this.waiting.length === 0;
  }

  close(): void {
    this.closed = true;
    for (const exchange of this.waiting.splice(0)) exchange.finish({ error: 'stopped' });
    this.idle.length = 0;
    for (const connection of this.all) connection.destroy();
  }

  private connect(): Connection {
    this.open += 1;
    const { protocol, hostname, port } = this.origin;
    const lookup = this.options.lookup;
    let socket: net.Socket;
    if (protocol === 'https:') {
      const secure = tls.connect({
        host: hostname,
        port,
        ...(net.isIP(hostname) ? {} : { servername: hostname }),
        ALPNProtocols: ['http/1.1'],
        ...(this.session ? { session: this.session } : {}),
        ...(lookup ? { lookup } : {}),
      });
      secure.on('session', (session: Buffer) => (this.session = session));
      socket = secure;
    } else socket = net.connect({ host: hostname, port, ...(lookup ? { lookup } : {}) });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    const connection = new Connection(socket, this, this.options.idleMs ?? DEFAULT_IDLE_MS, this.options.maxHeaderBytes ?? 16 * 1024);
    this.all.add(connection);
    return connection;
  }
}

class Connection {
  exchange: Exchange | undefined;
  idleSince = 0;
  /** Has completed an exchange: a failure before any answer may be a stale keep-alive. */
  private reused = false;
  private reusable = true;
  private destroyed = false;
  private error: NodeJS.ErrnoException | undefined;
  private readonly parser: ResponseParser;

  constructor(
    private readonly socket: net.Socket,
    private readonly pool: OriginPool,
    private idleMs: number,
    maxHeaderBytes: number,
  ) {
    this.parser = new ResponseParser(maxHeaderBytes);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('error', (error: NodeJS.ErrnoException) => (this.error ??= error));
    socket.on('close', () => this.onClose());
  }

  usable(now: number): boolean {
    return !this.destroyed && this.reusable && now - this.idleSince < this.idleMs;
  }

  start(exchange: Exchange): void {
    this.exchange = exchange;
    exchange.connection = this;
    this.parser.reset(exchange.maxBodyBytes);
    this.socket.write(exchange.payload, 'utf8');
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.reusable = false;
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    const exchange = this.exchange;
    if (!exchange) {
      // Bytes nobody asked for: the connection is out of step.
      this.destroy();
      return;
    }
    exchange.gotBytes = true;
    const outcome = this.parser.feed(chunk);
    if (outcome === MORE) return;
    if (typeof outcome === 'string') {
      this.exchange = undefined;
      this.destroy();
      exchange.finish({ error: outcome });
      return;
    }
    this.complete(exchange, outcome.leftover);
  }

  private complete(exchange: Exchange, leftover: boolean): void {
    const parser = this.parser;
    this.exchange = undefined;
    this.reused = true;
    if (parser.keepAliveMs !== undefined) this.idleMs = Math.min(this.idleMs, Math.max(0, parser.keepAliveMs - 1_000));
    // A cut body, more bytes than the response, or "close": this connection is not used again.
    if (!parser.keepAlive || parser.cut || leftover) this.destroy();
    exchange.finish({ status: parser.status, body: parser.body(), retryAfter: parser.retryAfter });
    if (!this.destroyed) this.pool.release(this);
  }

  private onEnd(): void {
    const exchange = this.exchange;
    if (exchange && this.parser.endsAtClose()) return this.complete(exchange, false);
    this.destroy();
  }

  private onClose(): void {
    this.destroyed = true;
    this.reusable = false;
    this.pool.gone(this);
    const exchange = this.exchange;
    if (!exchange || exchange.done) return;
    this.exchange = undefined;
    exchange.connection = undefined;
    const error = this.error;
    const stale = this.reused && !exchange.gotBytes && !exchange.retried && (!error || RETRYABLE_ON_STALE.has(error.code ?? ''));
    if (stale) return this.pool.retry(exchange);
    const reason = error
      ? error.code
        ? `${error.code}: ${error.message}`
        : error.message
      : exchange.gotBytes
        ? 'the connection closed before the response ended'
        : 'ECONNRESET: the connection closed before a response';
    exchange.finish({ error: reason });
  }
}
