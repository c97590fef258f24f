import { ident } from '../db/sql.ts';

/** What the writer needs to know of a table: where it is, its key, its typed columns. */
export interface TableShape {
  schema: string;
  name: string;
  /** Primary-key column (Airtable and most Stripe tables: `id`). */
  key: string;
  columns: Array<{ name: string; type: string; comment?: string }>;
  comment?: string;
}

/** PostgreSQL types a column may have; anything else is refused before it reaches SQL. */
const TYPE = /^(text|numeric|boolean|date|timestamptz|jsonb|bigint|integer|double precision)(\[\])?$/;

export function checkType(type: string): string {
  if (!TYPE.test(type)) throw new Error(`unsupported column type ${JSON.stringify(type)}`);
  return type;
}

export const qualified = (shape: Pick<TableShape, 'schema' | 'name'>) => `${ident(shape.schema)}.${ident(shape.name)}`;

/** `x("id" text, "tags" text[], …)`: the record definition for jsonb_to_recordset. */
export const recordDefinition = (shape: TableShape) => shape.columns.map((c) => `${ident(c.name)} ${checkType(c.type)}`).join(', ');

export const columnList = (shape: TableShape, prefix = '') => shape.columns.map((c) => `${prefix}${ident(c.name)}`).join(', ');

/** DDL for a new table: REPLICA IDENTITY FULL so the decoder sees prior values on update and delete. */
export function createTableStatements(shape: TableShape): string[] {
  const table = qualified(shape);
  const columns = shape.columns.map((c) => {
    const pk = c.name === shape.key ? ' PRIMARY KEY' : '';
    return `${ident(c.name)} ${checkType(c.type)}${pk}`;
  });
  const statements = [`CREATE TABLE ${table} (${columns.join(', ')})`, `ALTER TABLE ${table} REPLICA IDENTITY FULL`];
  statements.push(...commentStatements(shape));
  return statements;
}

export function commentStatements(shape: TableShape): string[] {
  const table = qualified(shape);
  const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;
  const out: string[] = [];
  if (shape.comment) out.push(`COMMENT ON TABLE ${table} IS ${quote(shape.comment)}`);
  for (const c of shape.columns) {
    if (c.comment) out.push(`COMMENT ON COLUMN ${table}.${ident(c.name)} IS ${quote(c.comment)}`);
  }
  return out;
}
