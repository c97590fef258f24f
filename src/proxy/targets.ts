import type { AttachmentLinks, SyncAttachmentLinks } from '../attachments/links.ts';
import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { toError } from '../errors.ts';
import { IdlePools } from '../db/idle-pools.ts';
import type { Secret } from '../control/secrets.ts';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncRecord, SyncStore } from '../control/syncs.ts';
import type { Logger } from '../log.ts';
import { type SyncSchemas, schemasOf } from '../syncdb/schemas.ts';

/** A sync the proxy writes to: its database and its stored key (for fetches the answer cannot replace). */
export interface SyncTarget {
  id: string;
  /** The sync's database; several syncs that share one share its pool. */
  pool: pg.Pool;
  /** Where the sync's tables and bookkeeping are in it. */
  schemas: SyncSchemas;
  key(): Promise<Secret>;
  /** The sync's stable attachment links, for a mapping that uses them. */
  links?: SyncAttachmentLinks;
}

export interface SyncTargetsOptions {
  /** Control database. */
  pool: pg.Pool;
  syncs: SyncStore;
  syncService: SyncService;
  logger: Logger;
  /** Connections per sync database (default 4). */
  maxConnections?: number;
  /** A sync database's pool not used for this long is closed (default 5 min). */
  idleMs?: number;
  /** Stable attachment links (a kind's setting may put them in its columns). */
  attachmentLinks?: AttachmentLinks;
  /** How long the list of a base's or an account's syncs is used without asking again (default 2 s). */
  listTtlMs?: number;
}

/**
 * Flushes the WAL so far: a synchronous commit flushes only a transaction that wrote WAL and
 * has an id, so it writes a message (which the decoder passes over) and takes one. One round
 * trip: the statements run in the simple query's one implicit transaction.
 */
const FLUSH_WAL = `SET LOCAL synchronous_commit = on; SELECT pg_logical_emit_message(false, '${MESSAGE_PREFIX.flush}', ''), txid_current()`;

interface Entry {
  target: SyncTarget;
  url: string;
  lastUsed: number;
}

/**
 * Finds the active syncs a proxied write belongs to, and keeps a small pool per sync
 * database. The list of a base's (an account's) syncs is asked of the control database at
 * most every 2 s: a sync created since has no tables built yet anyway (its first cycle
 * builds them), and a write to one being deleted lands in a database about to go.
 */
export class SyncTargets {
  private readonly entries = new Map<string, Entry>();
  private readonly lists = new Map<string, { ids: Promise<string[]>; until: number }>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly pools: IdlePools;
  /** The sync databases a write-through under way has used (see writing). */
  private readonly used = new AsyncLocalStorage<Set<string>>();
  /** Per sync database: a WAL flush under way, and whether another was asked for meanwhile. */
  private readonly flushing = new Map<string, { again: boolean }>();

  constructor(private readonly options: SyncTargetsOptions) {
    const idleMs = options.idleMs ?? 5 * 60_000;
    // Asynchronous commit: the write is visible to every reader at once; only its durability
    // waits for the next WAL flush (well under a second). A crash in between loses a change
    // that upstream still holds, and the sync brings it back; the client need not wait for a disk.
    this.pools = new IdlePools({
      max: options.maxConnections ?? 4,
      idlePoolMs: idleMs,
      sessionOptions: '-c synchronous_commit=off',
      onError: (err) => options.logger.warn({ err }, 'idle sync-database connection failed'),
    });
    this.sweeper = setInterval(() => this.forgetIdle(idleMs), Math.min(idleMs, 60_000));
    this.sweeper.unref();
  }

  /**
   * Runs a write-through, then has the WAL of every sync database it wrote to flushed behind
   * it. Its commits are asynchronous, and the decoder is sent only WAL that is on disk: alone,
   * a proxied write reached the event stream at the WAL writer's next round, 0–200 ms later and
   * up to 600 ms (the p99 of a quiet sync's change to its webhook was 190–300 ms). The flush
   * goes on its own connection, so the client does not wait for the disk; flushes of one
   * database are one at a time, the next covering every write before it.
   */
  async writing<T>(write: () => Promise<T>): Promise<T> {
    const used = new Set<string>();
    try {
      return await this.used.run(used, write);
    } finally {
      for (const url of used) this.flushBehind(url);
    }
  }

  private flushBehind(url: string): void {
    const under = this.flushing.get(url);
    if (under) {
      under.again = true;
      return;
    }
    const state = { again: true };
    this.flushing.set(url, state);
    void (async () => {
      try {
        while (state.again) {
          state.again = false;
          await this.pools.get(url).query(FLUSH_WAL);
        }
      } catch (error) {
        // The WAL writer flushes it anyway, within 600 ms.
        this.options.logger.debug({ err: toError(error) }, 'could not flush the WAL behind a proxied write');
      } finally {
        this.flushing.delete(url);
      }
    })();
  }

  /**
   * The active syncs a kind's condition on the syncs table selects (a constant SQL condition
   * of the kind's proxy, with its parameters), under `cacheKey` for listTtlMs.
   */
  async where(cacheKey: string, condition: string, params: unknown[]): Promise<SyncTarget[]> {
    const ids = await this.listed(cacheKey, async () => {
      const { rows } = await this.options.pool.query<{ id: string }>(`SELECT id FROM syncs WHERE state = 'active' AND (${condition}) ORDER BY id`, params);
      return rows.map((r) => r.id);
    });
    return this.targets(ids);
  }

  private listed(key: string, load: () => Promise<string[]>): Promise<string[]> {
    const hit = this.lists.get(key);
    if (hit && hit.until > Date.now()) return hit.ids;
    if (this.lists.size > 10_000) this.lists.clear();
    const ids = load();
    this.lists.set(key, { ids, until: Date.now() + (this.options.listTtlMs ?? 2_000) });
    // A failed lookup is not remembered.
    ids.catch(() => this.lists.delete(key));
    return ids;
  }

  private async targets(ids: string[]): Promise<SyncTarget[]> {
    const out: SyncTarget[] = [];
    for (const id of ids) {
      let entry = this.entries.get(id);
      if (!entry) {
        const sync = await this.options.syncs.get(id);
        if (sync?.state !== 'active') continue;
        entry = this.entries.get(id) ?? (await this.open(sync));
      }
      entry.lastUsed = Date.now();
      out.push(entry.target);
    }
    return out;
  }

  private async open(sync: SyncRecord): Promise<Entry> {
    const url = await this.options.syncService.adminUrl(sync);
    const existing = this.entries.get(sync.id);
    if (existing) return existing;
    const pools = this.pools;
    const used = this.used;
    let key: Promise<Secret> | undefined;
    const entry: Entry = {
      target: {
        id: sync.id,
        schemas: schemasOf(sync.schema),
        links: this.options.attachmentLinks?.forSync(sync.id),
        // Asked of the pools at each use, which keeps the pool alive while it is used.
        get pool() {
          used.getStore()?.add(url);
          return pools.get(url);
        },
        key: () => {
          const reading = (key ??= this.options.syncs.apiKey(sync.id));
          // A failed read is not remembered (see keyDigest).
          reading.catch(() => key === reading && (key = undefined));
          return reading;
        },
      },
      url,
      lastUsed: Date.now(),
    };
    this.entries.set(sync.id, entry);
    return entry;
  }

  /** Syncs not written for idleMs are looked up again when next written (their pools close on the same clock). */
  private forgetIdle(idleMs: number): void {
    const cutoff = Date.now() - idleMs;
    for (const [id, entry] of this.entries) if (entry.lastUsed < cutoff) this.entries.delete(id);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.entries.clear();
    await this.pools.close();
  }
}
