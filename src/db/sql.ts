import pg from 'pg';
import { connectionConfig } from './connect.ts';

/** Quotes an identifier once, at the edge; values always travel as parameters. */
export function ident(name: string): string {
  return pg.escapeIdentifier(name);
}

/** The same server as `url`, another database. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}

/** The same server and database as `url`, logged in as another role. */
export function withCredentials(url: string, user: string, password: string): string {
  const parsed = new URL(url);
  parsed.username = encodeURIComponent(user);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

/** Runs `fn` on a short-lived client and always closes it. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ ...connectionConfig(url), connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined); // a dropped connection surfaces as a rejected query instead
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Runs `work` in one transaction on a pooled connection: committed if it returns, rolled back
 * if it throws. `settings` are `SET LOCAL` statements for this transaction only.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, settings: string[] = []): Promise<T> {
  const client = await pool.connect();
  // A connection whose ROLLBACK fails too (a statement past its deadline still holds it, a
  // socket gone) is not put back into the pool for the next caller to hang on.
  let broken = false;
  try {
    // One round trip: the settings ride with BEGIN.
    await client.query(['BEGIN', ...settings.map((setting) => `SET LOCAL ${setting}`)].join('; '));
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    broken = await client.query('ROLLBACK').then(
      () => false,
      () => true,
    );
    throw error;
  } finally {
    client.release(broken);
  }
}
