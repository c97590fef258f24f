/**
 * A new sync database costs the server's walsenders almost nothing: it is copied from its
 * template with FILE_COPY (one WAL record), not through the WAL (some 8 MB that every logical
 * walsender of the server would read); and a kind's tables come with the copy of the server's
 * template for the kind, not as catalog changes made table by table.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import type { TemplateSpec } from '../src/control/templates.ts';
import { withDatabase } from '../src/db/sql.ts';
import { kindSchemaOf } from '../src/kinds/registry.ts';
import { stripeKind } from '../src/stripe/kind.ts';
import { prepareStripeDatabase } from '../src/stripe/prepare.ts';
import { newDatabaseName } from '../src/ids.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { query } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

test('provisioning a sync database writes well under a megabyte of WAL', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-provision-wal-'));
  const server = await CrashablePostgres.start('target', dir);
  try {
    const lsn = async () => BigInt((await query<{ b: string }>(server.adminUrl, "SELECT (pg_current_wal_lsn() - '0/0')::text AS b"))[0]!.b);
    // The first one warms the catalogs; the second is measured.
    await provisionDatabase({ adminUrl: server.adminUrl, name: newDatabaseName(), role: `${newDatabaseName()}_ro` }, 'wal-test', fileLogger());
    const before = await lsn();
    const name = newDatabaseName();
    await provisionDatabase({ adminUrl: server.adminUrl, name, role: `${name}_ro` }, 'wal-test', fileLogger());
    const written = Number((await lsn()) - before);
    assert.ok(written < 1024 * 1024, `${(written / 1024).toFixed(0)} kB of WAL`);
    assert.equal(await query(server.adminUrl, 'SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = $1', [name]), [{ n: 1 }]);
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test("a Stripe sync database copied from the server's template writes a small share of what building it wrote", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-provision-wal-'));
  const server = await CrashablePostgres.start('target', dir);
  const logger = fileLogger();
  const migrations = kindSchemaOf(stripeKind);
  const prepare = (url: string) => prepareStripeDatabase(url, logger);
  try {
    const lsn = async () => BigInt((await query<{ b: string }>(server.adminUrl, "SELECT (pg_current_wal_lsn() - '0/0')::text AS b"))[0]!.b);
    /** WAL of one Stripe sync database with its tables, made one way or the other. */
    const made = async (template: TemplateSpec | undefined) => {
      const name = newDatabaseName();
      const db = { adminUrl: server.adminUrl, name, role: `${name}_ro` };
      const before = await lsn();
      await provisionDatabase(db, 'wal-test', logger, 5, migrations, undefined, template);
      await prepare(withDatabase(server.adminUrl, name));
      const tables = await query<{ n: number }>(withDatabase(server.adminUrl, name), "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'");
      const readable = await query<{ n: number }>(
        withDatabase(server.adminUrl, name),
        "SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND has_table_privilege($1, c.oid, 'SELECT')",
        [db.role],
      );
      assert.ok(tables[0]!.n > 50, `${tables[0]!.n} tables`);
      assert.equal(readable, tables, 'the reader may read every table');
      return Number((await lsn()) - before);
    };
    const spec: TemplateSpec = { kind: 'stripe', version: stripeKind.templateVersion!(), prepare };
    await made(undefined); // warms the catalogs
    const built = await made(undefined);
    await made(spec); // builds the template
    const copied = await made(spec);
    process.stdout.write(`  built in place: ${(built / 1024).toFixed(0)} kB of WAL; copied from the template: ${(copied / 1024).toFixed(0)} kB\n`);
    assert.ok(copied < built / 5, `copied ${copied} bytes, built ${built}`);
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
