/**
 * A new sync database costs the server's walsenders almost nothing: it is copied from its
 * template with FILE_COPY (one WAL record), not through the WAL (some 8 MB that every logical
 * walsender of the server would read).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { newDatabaseName } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { query } from './harness/postgres.ts';

test('provisioning a sync database writes well under a megabyte of WAL', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-provision-wal-'));
  const server = await CrashablePostgres.start('target', dir);
  try {
    const lsn = async () => BigInt((await query<{ b: string }>(server.adminUrl, "SELECT (pg_current_wal_lsn() - '0/0')::text AS b"))[0]!.b);
    // The first one warms the catalogs; the second is measured.
    await provisionDatabase(
      { adminUrl: server.adminUrl, name: newDatabaseName(), role: `${newDatabaseName()}_ro` },
      'wal-test',
      createLogger({ level: 'silent' }),
    );
    const before = await lsn();
    const name = newDatabaseName();
    await provisionDatabase({ adminUrl: server.adminUrl, name, role: `${name}_ro` }, 'wal-test', createLogger({ level: 'silent' }));
    const written = Number((await lsn()) - before);
    assert.ok(written < 1024 * 1024, `${(written / 1024).toFixed(0)} kB of WAL`);
    assert.equal(await query(server.adminUrl, 'SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = $1', [name]), [{ n: 1 }]);
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
