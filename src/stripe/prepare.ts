import pg from 'pg';
import { connectionConfig } from '../db/connect.ts';
import type { Logger } from '../log.ts';
import { ensureTables } from './tables.ts';
import { openPool } from '../db/pool.ts';

/**
 * A new sync database's Stripe tables and bookkeeping, built when the sync is created (before
 * its 201), so a proxied write that follows at once is written through, not refused for a
 * table the runner has not built yet. The runner's own ensureTables then finds them built.
 */
export async function prepareStripeDatabase(adminUrl: string, logger: Logger): Promise<void> {
  const pool = openPool({ ...connectionConfig(adminUrl), max: 1 });
  try {
    await ensureTables(pool, logger);
  } finally {
    await pool.end();
  }
}
