import net from 'node:net';
import tls from 'node:tls';

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
  | { status: number; body: Buffer; error?: undefined }
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
    exchange.finish({ status: parser.status, body: parser.body() });
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

const MORE = Symbol('more');
const EMPTY = Buffer.alloc(0);
type FeedOutcome = typeof MORE | string | { leftover: boolean };

/**
 * The response side of one exchange. Status line and headers are bounded; the body is
 * framed by Content-Length, chunked encoding or the end of the connection (RFC 9112 §6.3),
 * and only its first `maxBodyBytes` are kept: past them the response counts as complete
 * (`cut`) and the connection is closed rather than read to the end.
 */
export class ResponseParser {
  status = 0;
  keepAlive = true;
  keepAliveMs: number | undefined;
  cut = false;
  private phase: 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'trailers' | 'close' | 'done' = 'head';
  private pending: Buffer | undefined;
  private remaining = 0;
  private line = '';
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private maxBodyBytes = 0;

  constructor(private readonly maxHeaderBytes: number) {}

  reset(maxBodyBytes: number): void {
    this.status = 0;
    this.keepAlive = true;
    this.keepAliveMs = undefined;
    this.cut = false;
    this.phase = 'head';
    this.pending = undefined;
    this.remaining = 0;
    this.line = '';
    this.kept = [];
    this.keptBytes = 0;
    this.maxBodyBytes = maxBodyBytes;
  }

  /** The body bytes kept (at most maxBodyBytes). */
  body(): Buffer {
    if (this.kept.length === 0) return EMPTY;
    return this.kept.length === 1 ? this.kept[0]! : Buffer.concat(this.kept);
  }

  /** The body runs to the end of the connection, which has come: the response is complete. */
  endsAtClose(): boolean {
    return this.phase === 'close';
  }

  /** Takes the next bytes; says whether more are needed, what went wrong, or that the response is complete. */
  feed(chunk: Buffer): FeedOutcome {
    let buffer = chunk;
    let at = 0;
    for (;;) {
      switch (this.phase) {
        case 'head': {
          const rest = at === 0 ? buffer : buffer.subarray(at);
          const joined = this.pending ? Buffer.concat([this.pending, rest]) : rest;
          const from = this.pending ? Math.max(0, this.pending.length - 3) : 0;
          const end = joined.indexOf('\r\n\r\n', from, 'latin1');
          if (end < 0) {
            if (joined.length > this.maxHeaderBytes) return 'the response headers are too large';
            this.pending = joined;
            return MORE;
          }
          if (end > this.maxHeaderBytes) return 'the response headers are too large';
          this.pending = undefined;
          const problem = this.head(joined.toString('latin1', 0, end));
          if (problem) return problem;
          buffer = joined;
          at = end + 4;
          break;
        }
        case 'length': {
          const n = Math.min(this.remaining, buffer.length - at);
          if (this.keep(buffer, at, at + n)) return { leftover: false };
          this.remaining -= n;
          at += n;
          if (this.remaining === 0) this.phase = 'done';
          else return MORE;
          break;
        }
        case 'chunk-size':
        case 'trailers': {
          const newline = buffer.indexOf(10, at);
          const piece = buffer.toString('latin1', at, newline < 0 ? buffer.length : newline);
          this.line += piece;
          if (this.line.length > this.maxHeaderBytes) return 'a chunk header of the response is too large';
          if (newline < 0) return MORE;
          at = newline + 1;
          const line = this.line.endsWith('\r') ? this.line.slice(0, -1) : this.line;
          this.line = '';
          if (this.phase === 'trailers') {
            if (line === '') this.phase = 'done';
            break;
          }
          const size = /^([0-9a-fA-F]{1,8})[ \t]*(;.*)?$/.exec(line);
          if (!size) return 'the response has a malformed chunk';
          this.remaining = parseInt(size[1]!, 16);
          this.phase = this.remaining === 0 ? 'trailers' : 'chunk-data';
          break;
        }
        case 'chunk-data': {
          const n = Math.min(this.remaining, buffer.length - at);
          if (this.keep(buffer, at, at + n)) return { leftover: false };
          this.remaining -= n;
          at += n;
          if (this.remaining > 0) return MORE;
          this.phase = 'chunk-end';
          this.line = '';
          break;
        }
        case 'chunk-end': {
          // The CRLF after a chunk's data.
          while (at < buffer.length && this.line !== '\n') {
            const byte = buffer[at++]!;
            if (byte === 10) this.line = '\n';
            else if (byte !== 13 || this.line !== '') return 'the response has a malformed chunk';
            else this.line = '\r';
          }
          if (this.line !== '\n') return MORE;
          this.line = '';
          this.phase = 'chunk-size';
          break;
        }
        case 'close': {
          if (this.keep(buffer, at, buffer.length)) return { leftover: false };
          return MORE;
        }
        case 'done':
          return { leftover: at < buffer.length };
      }
      if (at >= buffer.length && this.phase !== 'done') return MORE;
    }
  }

  /** Keeps body bytes up to the bound; true when the bound is passed (the rest is not read). */
  private keep(buffer: Buffer, from: number, to: number): boolean {
    if (to <= from) return false;
    const room = this.maxBodyBytes - this.keptBytes;
    if (to - from > room) {
      if (room > 0) this.kept.push(buffer.subarray(from, from + room));
      this.keptBytes = this.maxBodyBytes;
      this.cut = true;
      this.phase = 'done';
      return true;
    }
    this.kept.push(buffer.subarray(from, to));
    this.keptBytes += to - from;
    return false;
  }

  /** The status line and headers; decides the framing of the body. An error text, or undefined. */
  private head(text: string): string | undefined {
    // "HTTP/1.x NNN[ reason]", read by hand: this runs once per delivery.
    const minor = text.charCodeAt(7);
    if (!text.startsWith('HTTP/1.') || (minor !== 48 && minor !== 49) || text.charCodeAt(8) !== 32) return 'the response is not HTTP/1.x';
    const d1 = text.charCodeAt(9) - 48;
    const d2 = text.charCodeAt(10) - 48;
    const d3 = text.charCodeAt(11) - 48;
    const after = text.charCodeAt(12);
    if (!(d1 >= 0 && d1 <= 9 && d2 >= 0 && d2 <= 9 && d3 >= 0 && d3 <= 9) || !(Number.isNaN(after) || after === 32 || after === 9 || after === 13)) {
      return 'the response is not HTTP/1.x';
    }
    const status = d1 * 100 + d2 * 10 + d3;
    let contentLength: number | undefined;
    let chunked = false;
    let transferEncoding = false;
    let close = false;
    let keepAliveToken = false;
    for (let at = text.indexOf('\r\n'); at >= 0; ) {
      const start = at + 2;
      const next = text.indexOf('\r\n', start);
      const end = next < 0 ? text.length : next;
      at = next;
      const colon = text.indexOf(':', start);
      if (colon < 0 || colon >= end) continue;
      // Only four headers matter here; the others are told apart by the length of their name.
      const length = colon - start;
      if (length !== 10 && length !== 14 && length !== 17) continue;
      const name = text.slice(start, colon).toLowerCase();
      const value = text.slice(colon + 1, end).trim();
      if (name === 'content-length') {
        if (!/^\d+$/.test(value)) return 'the response has an invalid Content-Length';
        const n = Number(value);
        if (contentLength !== undefined && contentLength !== n) return 'the response has conflicting Content-Length headers';
        contentLength = n;
      } else if (name === 'transfer-encoding') {
        transferEncoding = true;
        const codings = value.toLowerCase().split(',');
        chunked = codings[codings.length - 1]!.trim() === 'chunked';
      } else if (name === 'connection') {
        for (const token of value.toLowerCase().split(',')) {
          const t = token.trim();
          if (t === 'close') close = true;
          else if (t === 'keep-alive') keepAliveToken = true;
        }
      } else if (name === 'keep-alive') {
        const timeout = /(?:^|[,;\s])timeout\s*=\s*(\d+)/i.exec(value);
        if (timeout) this.keepAliveMs = Number(timeout[1]) * 1000;
      }
    }
    if (status >= 100 && status < 200) {
      // An interim answer (100 Continue, 103 Early Hints): the real one follows.
      if (status === 101) return 'the receiver switched protocols';
      this.keepAliveMs = undefined;
      return undefined;
    }
    this.status = status;
    this.keepAlive = minor === 49 ? !close : keepAliveToken && !close;
    if (status === 204 || status === 304) this.phase = 'done';
    else if (transferEncoding) {
      // With Transfer-Encoding, Content-Length is ignored, and the connection is not reused.
      if (contentLength !== undefined) this.keepAlive = false;
      this.phase = chunked ? 'chunk-size' : 'close';
    } else if (contentLength !== undefined) {
      this.remaining = contentLength;
      this.phase = contentLength === 0 ? 'done' : 'length';
    } else this.phase = 'close';
    if (this.phase === 'close') this.keepAlive = false;
    return undefined;
  }
}
