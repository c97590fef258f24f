import type { TableMapping } from './schema.ts';

export interface MigrationPlan {
  /** Same shape as built: sweep in place. */
  sweep: TableMapping[];
  /** New or reshaped: build in public_swap, then swap in. */
  rebuild: TableMapping[];
  /** Same shape, but an upstream name changed: sweep, and refresh the COMMENTs. */
  recomment: TableMapping[];
  /** Built tables whose upstream table is gone. */
  drop: TableMapping[];
}

/** What decides the table's SQL shape; upstream names only show in COMMENTs. */
function structure(mapping: TableMapping): string {
  return JSON.stringify({
    name: mapping.name,
    columns: mapping.columns.map((c) => [c.fieldId, c.name, c.type, c.converter]),
  });
}

/**
 * JSON with every object's keys sorted. The built mapping comes back from a jsonb column,
 * which orders keys its own way: compared by key order, every table looked renamed and had
 * its COMMENTs rewritten each cycle, catalog changes each walsender of the server decodes.
 */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** Compares the mapping from the current upstream schema with what the database holds. */
export function planMigration(desired: TableMapping[], built: Map<string, TableMapping>): MigrationPlan {
  const plan: MigrationPlan = { sweep: [], rebuild: [], recomment: [], drop: [] };
  const wanted = new Set(desired.map((m) => m.tableId));
  for (const mapping of desired) {
    const current = built.get(mapping.tableId);
    if (!current || structure(current) !== structure(mapping)) plan.rebuild.push(mapping);
    else if (canonical(current) !== canonical(mapping)) plan.recomment.push(mapping);
    else plan.sweep.push(mapping);
  }
  for (const [tableId, mapping] of built) if (!wanted.has(tableId)) plan.drop.push(mapping);
  return plan;
}
