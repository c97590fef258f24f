import type pg from 'pg';
import { ident } from '../db/sql.ts';
import { qualified, type TableShape } from './shape.ts';

/** Keys a sweep keeps in memory; past this many they go to a temporary table. */
export const SPILL_AT = 20_000;
const SPILL_TABLE = 'sweep_seen';

/**
 * The keys a listing saw, for deleting the rows it did not see. Kept in memory while few:
 * a temporary table is a catalog change (CREATE, TRUNCATE and DROP each write WAL that every
 * logical walsender of the server decodes, and that a busy server did hundreds of times a
 * second), so only a large table's listing spills its keys into one, keeping memory flat.
 */
/** Unproven keys one listing hands back: more wait for the next one. */
const UNPROVEN_MAX = 1000;

export class SeenKeys {
  private keys = new Set<string>();
  private spilled = false;

  constructor(private readonly client: pg.ClientBase) {}

  async add(keys: string[]): Promise<void> {
    if (this.spilled) return this.insert(keys);
    for (const key of keys) this.keys.add(key);
    if (this.keys.size < SPILL_AT) return;
    await this.client.query(`CREATE TEMP TABLE IF NOT EXISTS ${SPILL_TABLE} (id text PRIMARY KEY)`);
    await this.client.query(`TRUNCATE ${SPILL_TABLE}`);
    this.spilled = true;
    await this.insert([...this.keys]);
    this.keys = new Set();
  }

  /** Starts over (a listing restarted). */
  async clear(): Promise<void> {
    this.keys = new Set();
    if (this.spilled) await this.client.query(`TRUNCATE ${SPILL_TABLE}`);
  }

  /** Drops the temporary table if the keys spilled into one. */
  async release(): Promise<void> {
    if (this.spilled) await this.client.query(`DROP TABLE IF EXISTS ${SPILL_TABLE}`);
    this.spilled = false;
  }

  /**
   * Deletes the rows whose key was not seen, created before `createdBefore`: gone upstream.
   * A row created since may be missing from the listing only because it is new, so the
   * listing proves nothing of it: its keys come back as `unproven` (at most UNPROVEN_MAX), for
   * the caller to ask the upstream about one by one.
   */
  async deleteUnseen(
    shape: Pick<TableShape, 'schema' | 'name' | 'key'>,
    createdColumn: string,
    createdBefore: Date,
  ): Promise<{ deleted: number; unproven: string[] }> {
    const key = `t.${ident(shape.key)}`;
    const column = `t.${ident(createdColumn)}`;
    const unseen = this.spilled
      ? `NOT EXISTS (SELECT 1 FROM ${SPILL_TABLE} s WHERE s.id = ${key})`
      : `NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS s(id) WHERE s.id = ${key})`;
    const values = this.spilled ? [createdBefore] : [createdBefore, [...this.keys]];
    const result = await this.client.query(`DELETE FROM ${qualified(shape)} t WHERE ${unseen} AND (${column} IS NULL OR ${column} < $1)`, values);
    const { rows } = await this.client.query<{ key: string }>(
      `SELECT ${key} AS key FROM ${qualified(shape)} t WHERE ${unseen} AND ${column} >= $1 LIMIT ${UNPROVEN_MAX}`,
      values,
    );
    return { deleted: result.rowCount ?? 0, unproven: rows.map((r) => String(r.key)) };
  }

  private async insert(keys: string[]): Promise<void> {
    if (keys.length > 0) await this.client.query(`INSERT INTO ${SPILL_TABLE} SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, [keys]);
  }
}
