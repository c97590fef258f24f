import type pg from 'pg';
import { randomLowerAlnum } from '../../src/ids.ts';
import { ident, withClient, withDatabase } from '../../src/db/sql.ts';

/**
 * The PostgreSQL server of this test run, started by test/run.ts. Each test file makes
 * its own databases on it, so files never see each other's state.
 */
export function serverAdminUrl(): string {
  const url = process.env.TEST_PG_ADMIN_URL;
  if (!url) throw new Error('TEST_PG_ADMIN_URL is unset: run the tests with `npm test` (test/run.ts starts PostgreSQL)');
  return url;
}

export async function freshDatabase(prefix = 't', template?: string): Promise<string> {
  const name = `${prefix}_${randomLowerAlnum(10)}`;
  await withClient(serverAdminUrl(), (admin) => admin.query(`CREATE DATABASE ${ident(name)}${template ? ` TEMPLATE ${ident(template)}` : ''}`));
  return withDatabase(serverAdminUrl(), name);
}

/** The database test/run.ts made once and migrated, that control databases are copied from. */
export const CONTROL_TEMPLATE = 'tributary_test_control_template';

/**
 * A control database for a test service: a copy of the run's migrated template (a file copy,
 * where running the migrations took some 0.6 s a service), or an empty one to be migrated
 * where there is none (a file run without test/run.ts's template). The service's start still
 * runs the migrations, which find them all applied.
 */
export function freshControlDatabase(): Promise<string> {
  return freshDatabase('ctl', process.env.TEST_CONTROL_TEMPLATE);
}

export async function query<R extends pg.QueryResultRow = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<R[]> {
  return withClient(url, async (client) => (await client.query<R>(sql, params)).rows);
}

/** Runs one statement as the given URL's user and returns the error it raised, if any. */
export async function errorOf(url: string, ...statements: string[]): Promise<Error | undefined> {
  try {
    await withClient(url, async (client) => {
      for (const sql of statements) await client.query(sql);
    });
    return undefined;
  } catch (error) {
    return error as Error;
  }
}
