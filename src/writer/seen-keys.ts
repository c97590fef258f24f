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
   * Deletes the rows whose key was not seen, created before `createdBefore` (a row created
   * after the listing began may be missing from it): gone upstream. Returns how many went.
   */
  async deleteUnseen(shape: Pick<TableShape, 'schema' | 'name' | 'key'>, createdColumn: string, createdBefore: Date): Promise<number> {
    const key = `t.${ident(shape.key)}`;
    const created = `(t.${ident(createdColumn)} IS NULL OR t.${ident(createdColumn)} < $1)`;
    const result = this.spilled
      ? await this.client.query(`DELETE FROM ${qualified(shape)} t WHERE NOT EXISTS (SELECT 1 FROM ${SPILL_TABLE} s WHERE s.id = ${key}) AND ${created}`, [
          createdBefore,
        ])
      : await this.client.query(
          `DELETE FROM ${qualified(shape)} t WHERE NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS s(id) WHERE s.id = ${key}) AND ${created}`,
          [createdBefore, [...this.keys]],
        );
    return result.rowCount ?? 0;
  }

  private async insert(keys: string[]): Promise<void> {
    if (keys.length > 0) await this.client.query(`INSERT INTO ${SPILL_TABLE} SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, [keys]);
  }
}
