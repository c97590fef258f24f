/**
 * A reader role put back as provisioned by two at once (the sync's reader guard, and the API
 * changing the reader's limits) must not fail: PostgreSQL answers two concurrent `ALTER ROLE
 * … SET` of one role with a unique violation on pg_db_role_setting or "tuple concurrently
 * updated". A fresh-clone run met it as a 500 on `PATCH /api/syncs/:id` (hostile.reader-role).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase, restoreReaderRole } from '../src/control/provisioner.ts';
import { DEFAULT_READER_LIMITS } from '../src/control/reader-limits.ts';
import { newDatabaseName } from '../src/ids.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

test('eight restores of one role at once, with two sets of limits, all succeed; the role ends as provisioned', async () => {
  const name = newDatabaseName();
  const db = { adminUrl: serverAdminUrl(), name, role: `${name}_ro` };
  await provisionDatabase(db, 'concurrent-password', fileLogger());
  // Changed behind the service's back, as a reader can: every restore finds a difference.
  await query(serverAdminUrl(), `ALTER ROLE "${db.role}" SET work_mem = '512MB'`);
  const limits = (i: number) => ({ ...DEFAULT_READER_LIMITS, statementTimeoutMs: i % 2 === 0 ? 2000 : 3000 });
  const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => restoreReaderRole(db, 'concurrent-password', limits(i))));
  assert.equal(
    results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)),
    [],
  );
  // Whichever ran last, one more restore leaves the role as provisioned, and the next finds it so.
  await restoreReaderRole(db, 'concurrent-password', limits(0));
  const again = await restoreReaderRole(db, 'concurrent-password', limits(0));
  assert.equal(again.changed, [], 'the role is as the restore left it, with nothing stray');
  const [row] = await query<{ config: string[] }>(
    serverAdminUrl(),
    'SELECT s.setconfig AS config FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1 AND s.setdatabase = 0',
    [db.role],
  );
  assert.ok(row!.config.includes('statement_timeout=2s') || row!.config.includes('statement_timeout=2000'), row!.config.join(', '));
  assert.not.ok(row!.config.some((c) => c.startsWith('work_mem=512MB')));
});

test.run();
