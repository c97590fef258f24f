/**
 * The server's template of a kind (src/control/templates.ts): built once, never taken for
 * complete after a build that died half-way, and earlier releases' templates dropped. Several
 * syncs made at once build it once and each get a copy.
 */
import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { type TemplateSpec, templateName } from '../src/control/templates.ts';
import { ident, withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { CORE } from '../src/syncdb/core.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
const admin = serverAdminUrl();

test('a half-built template and an earlier release are dropped; concurrent syncs share one build', async () => {
  // A kind of this test's own, so no other test file's template is touched.
  const kind = `t${randomUUID().slice(0, 8)}`;
  let builds = 0;
  const spec: TemplateSpec = {
    kind,
    version: '2',
    prepare: async (url) => {
      builds++;
      await query(url, 'CREATE TABLE public.things (id text PRIMARY KEY)');
    },
  };
  const name = templateName(spec, [CORE]);
  const earlier = templateName({ ...spec, version: '1' }, [CORE]);
  await query(admin, `CREATE DATABASE ${ident(earlier)} ALLOW_CONNECTIONS false`);
  // A build that died: under the building name, with a table the finished one must not have.
  await query(admin, `CREATE DATABASE ${ident(`${name}_new`)}`);
  await query(withDatabase(admin, `${name}_new`), 'CREATE TABLE public.leftover (x int)');

  const dbs = Array.from({ length: 3 }, () => newDatabaseName());
  await Promise.all(dbs.map((db) => provisionDatabase({ adminUrl: admin, name: db, role: `${db}_ro` }, 'pw', logger, 5, [], undefined, spec)));

  assert.is(builds, 1, 'built once');
  const templates = await query<{ datname: string; datallowconn: boolean }>(
    admin,
    'SELECT datname, datallowconn FROM pg_database WHERE starts_with(datname, $1) ORDER BY 1',
    [`tributary_template_${kind}_`],
  );
  assert.equal(templates, [{ datname: name, datallowconn: false }]);
  for (const db of dbs) {
    const tables = await query<{ tablename: string }>(withDatabase(admin, db), "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1");
    assert.equal(
      tables.map((t) => t.tablename),
      ['_sync_meta', 'things'],
      db,
    );
    const reader = await query<{ ok: boolean }>(withDatabase(admin, db), "SELECT has_table_privilege($1, 'public.things', 'SELECT') AS ok", [`${db}_ro`]);
    assert.equal(reader, [{ ok: true }]);
  }
  for (const db of [...dbs, name]) {
    if (db !== name) await query(admin, 'SELECT pg_drop_replication_slot($1)', [db]);
    await query(admin, `DROP DATABASE ${ident(db)}`);
  }
  for (const db of dbs) await query(admin, `DROP ROLE ${ident(`${db}_ro`)}`);
});

test("two releases making syncs side by side: each drops the other's template, and every sync is still made", async () => {
  const kind = `t${randomUUID().slice(0, 8)}`;
  const spec = (version: string): TemplateSpec => ({ kind, version, prepare: async (url) => void (await query(url, 'CREATE TABLE public.things (id text)')) });
  const dbs = Array.from({ length: 8 }, () => newDatabaseName());
  const results = await Promise.allSettled(
    dbs.map((db, i) => provisionDatabase({ adminUrl: admin, name: db, role: `${db}_ro` }, 'pw', logger, 5, [], undefined, spec(String(i % 2)))),
  );
  const failed = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
  assert.equal(failed, [], 'every sync database was made');
  for (const db of dbs) {
    await query(admin, 'SELECT pg_drop_replication_slot($1)', [db]);
    await query(admin, `DROP DATABASE ${ident(db)}`);
    await query(admin, `DROP ROLE ${ident(`${db}_ro`)}`);
  }
  const left = await query<{ datname: string }>(admin, 'SELECT datname FROM pg_database WHERE starts_with(datname, $1)', [`tributary_template_${kind}_`]);
  for (const { datname } of left) await query(admin, `DROP DATABASE ${ident(datname)}`);
});

test.run();
