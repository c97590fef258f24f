import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrate } from 'postgres-migrations';
import type { Logger } from '../log.ts';

const sqlDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'sql');

/**
 * Applies the numbered migrations in sql/. A failure throws: the service must not
 * start on a half-migrated control database.
 */
export async function migrateControlDatabase(url: string, logger: Logger): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined); // a dropped connection fails the migration's query instead
  await client.connect();
  try {
    const applied = await migrate({ client }, sqlDir, { logger: (msg) => logger.debug(msg) });
    if (applied.length > 0) logger.info({ migrations: applied.map((m) => m.name) }, 'control database migrated');
  } finally {
    await client.end();
  }
}
