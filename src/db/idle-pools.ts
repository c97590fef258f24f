import type pg from 'pg';
import { connectionConfig } from './connect.ts';
import { dropIdleAfterTimeout } from './drop-idle.ts';
import { openPool } from './pool.ts';

export interface IdlePoolsOptions {
  /** Connections per database (default 2). */
  max?: number;
  /** A connection unused this long is closed (default 30 s). */
  idleConnectionMs?: number;
  /** A database's pool unused this long is dropped (default 10 min): syncs get deleted. */
  idlePoolMs?: number;
  /**
   * A statement unanswered this long fails, and its connection is dropped (default 30 s):
   * over a path that hangs without closing, it would otherwise wait as long as TCP retries,
   * and every statement queued behind it too. These pools are for short statements.
   */
  queryTimeoutMs?: number;
  /** Session settings for every connection (`-c name=value …`). */
  sessionOptions?: string;
  /** An idle connection that failed (database restarted or deleted); it is replaced on the next use. */
  onError?: (error: Error, url: string) => void;
}

/**
 * Small pools for short statements against many databases (one per sync), kept while they
 * are in use: a new connection costs a backend start and a SCRAM exchange, several
 * milliseconds that a statement taking a fraction of one should not pay each time.
 */
export class IdlePools {
  private readonly pools = new Map<string, { pool: pg.Pool; lastUsed: number }>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: IdlePoolsOptions = {}) {
    const idlePoolMs = options.idlePoolMs ?? 10 * 60_000;
    this.sweeper = setInterval(() => this.dropIdle(idlePoolMs), Math.min(idlePoolMs, 60_000));
    this.sweeper.unref();
  }

  get(url: string): pg.Pool {
    // A pool made after close() would never be ended.
    if (this.closed) throw new Error('the connection pools are closed');
    const entry = this.pools.get(url);
    if (entry) {
      entry.lastUsed = Date.now();
      return entry.pool;
    }
    const pool = openPool(
      {
        ...connectionConfig(url),
        max: this.options.max ?? 2,
        idleTimeoutMillis: this.options.idleConnectionMs ?? 30_000,
        connectionTimeoutMillis: 10_000,
        query_timeout: this.options.queryTimeoutMs ?? 30_000,
        ...(this.options.sessionOptions ? { options: this.options.sessionOptions } : {}),
      },
      // A dropped connection (database restarted or deleted) is replaced on the next use.
      (error) => this.options.onError?.(error, url),
    );
    dropIdleAfterTimeout(pool);
    this.pools.set(url, { pool, lastUsed: Date.now() });
    return pool;
  }

  /** Closes a database's pool now (the database is gone); a later get() opens a new one. */
  async drop(url: string): Promise<void> {
    const entry = this.pools.get(url);
    if (!entry) return;
    this.pools.delete(url);
    await entry.pool.end().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const pools = [...this.pools.values()].map((e) => e.pool);
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
  }

  private dropIdle(idleMs: number): void {
    const cutoff = Date.now() - idleMs;
    for (const [url, entry] of this.pools) {
      if (entry.lastUsed >= cutoff) continue;
      this.pools.delete(url);
      void entry.pool.end().catch(() => undefined);
    }
  }
}
