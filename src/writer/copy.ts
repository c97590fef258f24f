import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { ident } from '../db/sql.ts';
import { qualified, type TableShape } from './shape.ts';
import type { Row } from './upsert.ts';

const SPECIAL = /[\\\t\n\r]/;

/** Escapes a value for PostgreSQL's COPY text format (most values need nothing). */
export function escapeText(text: string): string {
  if (!SPECIAL.test(text)) return text;
  return text.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r');
}

function arrayLiteral(items: unknown[]): string {
  const element = (item: unknown) => (item === null || item === undefined ? 'NULL' : `"${String(item).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
  return `{${items.map(element).join(',')}}`;
}

export type Encoder = (value: unknown) => string;

const encoders = {
  array: (value: unknown) => escapeText(arrayLiteral(Array.isArray(value) ? value : [value])),
  json: (value: unknown) => escapeText(JSON.stringify(value)),
  scalar: (value: unknown) => escapeText(String(value)),
} satisfies Record<string, Encoder>;

/** The COPY text encoder for a column type (values are never null here). */
export function encoderFor(type: string): Encoder {
  return type.endsWith('[]') ? encoders.array : type === 'jsonb' ? encoders.json : encoders.scalar;
}

/** Per shape, once: which encoder each column takes (this runs for every cell of a load). */
const compiled = new WeakMap<TableShape, Array<{ name: string; encode: Encoder }>>();

function columnsOf(shape: TableShape) {
  let columns = compiled.get(shape);
  if (!columns) {
    columns = shape.columns.map((c) => ({
      name: c.name,
      encode: encoderFor(c.type),
    }));
    compiled.set(shape, columns);
  }
  return columns;
}

/** One row as a line of COPY text format, columns in the shape's order. */
export function copyLine(shape: TableShape, row: Row): string {
  const columns = columnsOf(shape);
  const fields = new Array<string>(columns.length);
  for (let i = 0; i < columns.length; i++) {
    const value = row[columns[i]!.name];
    fields[i] = value === null || value === undefined ? '\\N' : columns[i]!.encode(value);
  }
  return `${fields.join('\t')}\n`;
}

/**
 * Loads rows into a table nobody else writes (a rebuild in public_swap) with COPY: the
 * fastest way in, and safe there because the table starts empty and one listing never
 * yields a record twice.
 */
export async function copyRows(client: pg.ClientBase, shape: TableShape, rows: Row[]): Promise<number> {
  if (rows.length === 0) return 0;
  await copyText(client, shape, rows.map((row) => copyLine(shape, row)).join(''));
  return rows.length;
}

/** COPY of lines already in text format, columns in the shape's order. */
export async function copyText(client: pg.ClientBase, shape: TableShape, text: string): Promise<void> {
  if (text === '') return;
  const columns = shape.columns.map((c) => ident(c.name)).join(', ');
  const stream = client.query(copyFrom(`COPY ${qualified(shape)} (${columns}) FROM STDIN`));
  await new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', reject);
    stream.end(text);
  });
}

export interface CopyStream {
  /** Sends lines; waits only when PostgreSQL is behind (backpressure). */
  write(text: string): Promise<void>;
  /** Finishes the COPY; resolves once PostgreSQL has taken every row. */
  end(): Promise<void>;
  /** Abandons the COPY: nothing of it stays. */
  abort(): Promise<void>;
}

/**
 * One COPY for a whole load, fed as pages arrive: PostgreSQL ingests on its own core
 * while Node converts the next page, instead of the two taking turns per batch.
 */
export function openCopy(client: pg.ClientBase, shape: TableShape): CopyStream {
  const columns = shape.columns.map((c) => ident(c.name)).join(', ');
  const stream = client.query(copyFrom(`COPY ${qualified(shape)} (${columns}) FROM STDIN`));
  let failure: Error | undefined;
  const done = new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', (error: Error) => {
      failure = error;
      reject(error);
    });
  });
  done.catch(() => undefined); // surfaced by write() or end()
  return {
    async write(text) {
      if (failure) throw failure;
      // A connection that ends mid-COPY emits 'error' and never 'drain': wait for either.
      if (!stream.write(text)) await Promise.race([new Promise<void>((resolve) => stream.once('drain', resolve)), done.catch(() => undefined)]);
      if (failure) throw failure;
    },
    async end() {
      stream.end();
      await done;
    },
    async abort() {
      stream.destroy(new Error('load abandoned'));
      await done.catch(() => undefined);
    },
  };
}
