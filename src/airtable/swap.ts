import type pg from 'pg';
import { ident, inTransaction } from '../db/sql.ts';
import { commentStatements, createTableStatements, qualified } from '../writer/shape.ts';
import type { TableMapping } from './schema.ts';
import { saveBuilt, shapeOf } from './tables.ts';

/** Readers hold locks only for a query; a stuck one must not stall the sync forever. */
const LOCK_TIMEOUT = ["lock_timeout = '30s'"];

/** A fresh, empty table in public_swap for a rebuild; a leftover of an interrupted one goes first. */
export async function prepareRebuild(db: pg.Pool, mapping: TableMapping): Promise<void> {
  const shape = shapeOf(mapping, 'public_swap');
  await inTransaction(db, async (client) => {
    await client.query(`DROP TABLE IF EXISTS ${qualified(shape)}`);
    for (const statement of createTableStatements(shape)) await client.query(statement);
  }, LOCK_TIMEOUT);
}

/**
 * Puts a rebuilt table in place of the old one in one transaction: readers see the old
 * table until the commit and the new one after, never a half-built one. The record of
 * the new mapping commits with it. A logical message marks the swap in the WAL for the
 * decoder.
 */
export async function swapIn(db: pg.Pool, mapping: TableMapping): Promise<void> {
  await inTransaction(db, async (client) => {
    const { rows } = await client.query<{ upstream_id: string; db_name: string }>(
      'SELECT upstream_id, db_name FROM public_swap._tables WHERE upstream_id = $1 OR db_name = $2 FOR UPDATE',
      [mapping.tableId, mapping.name],
    );
    const previous = rows.find((r) => r.upstream_id === mapping.tableId);
    if (previous) await client.query(`DROP TABLE IF EXISTS public.${ident(previous.db_name)}`);
    // Another upstream table still holds the name (two tables traded names): move it
    // aside; its own rebuild, due in this cycle, gives it its new name.
    for (const holder of rows.filter((r) => r.upstream_id !== mapping.tableId)) {
      const aside = `${holder.db_name.slice(0, 40)}_moving_${holder.upstream_id.toLowerCase()}`;
      await client.query(`ALTER TABLE public.${ident(holder.db_name)} RENAME TO ${ident(aside)}`);
      await client.query('UPDATE public_swap._tables SET db_name = $2 WHERE upstream_id = $1', [holder.upstream_id, aside]);
    }
    await client.query(`ALTER TABLE public_swap.${ident(mapping.name)} SET SCHEMA public`);
    await saveBuilt(client, mapping);
    await client.query("SELECT pg_logical_emit_message(true, 'tributary.swap', $1)", [
      JSON.stringify({ table: mapping.name, upstream_id: mapping.tableId, previous: previous?.db_name ?? null }),
    ]);
  }, LOCK_TIMEOUT);
}

/** Same shape, new upstream names: only the COMMENTs and the stored mapping change. */
export async function refreshComments(db: pg.Pool, mapping: TableMapping): Promise<void> {
  await inTransaction(db, async (client) => {
    for (const statement of commentStatements(shapeOf(mapping, 'public'))) await client.query(statement);
    await saveBuilt(client, mapping);
  }, LOCK_TIMEOUT);
}

/** The upstream table is gone: so is ours. */
export async function dropTable(db: pg.Pool, mapping: TableMapping): Promise<void> {
  await inTransaction(db, async (client) => {
    const { rows } = await client.query<{ db_name: string }>('SELECT db_name FROM public_swap._tables WHERE upstream_id = $1', [
      mapping.tableId,
    ]);
    await client.query(`DROP TABLE IF EXISTS public.${ident(rows[0]?.db_name ?? mapping.name)}`);
    await client.query('DELETE FROM public_swap._tables WHERE upstream_id = $1', [mapping.tableId]);
    await client.query("SELECT pg_logical_emit_message(true, 'tributary.drop', $1)", [
      JSON.stringify({ table: mapping.name, upstream_id: mapping.tableId }),
    ]);
  }, LOCK_TIMEOUT);
}
