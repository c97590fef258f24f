/** The response parser of the webhook HTTP/1.1 client (http1.ts): each connection feeds it what its socket reads. */

/** feed() needs more bytes before the response is complete. */
export const MORE = Symbol('more');
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
  /** The Retry-After header as sent (seconds or an HTTP-date), for the deliverer's next attempt. */
  retryAfter: string | undefined;
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
    this.retryAfter = undefined;
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
      // Only five headers matter here; the others are told apart by the length of their name.
      const length = colon - start;
      if (length !== 10 && length !== 11 && length !== 14 && length !== 17) continue;
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
      } else if (name === 'retry-after') {
        this.retryAfter = value.slice(0, 64);
      } else if (name === 'keep-alive') {
        const timeout = /(?:^|[,;\s])timeout\s*=\s*(\d+)/i.exec(value);
        if (timeout) this.keepAliveMs = Number(timeout[1]) * 1000;
      }
    }
    if (status >= 100 && status < 200) {
      // An interim answer (100 Continue, 103 Early Hints): the real one follows.
      if (status === 101) return 'the receiver switched protocols';
      this.keepAliveMs = undefined;
      this.retryAfter = undefined;
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
