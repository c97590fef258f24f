import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { newDatabaseName } from '../src/ids.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { createAccount, request, startTestService, stripeSyncBody } from './harness/service.ts';
import { fileLogger } from './harness/test-log.ts';

interface Leftovers {
  databases: string[];
  roles: string[];
  slots: string[];
}

async function leftovers(names: string[]): Promise<Leftovers> {
  const admin = serverAdminUrl();
  const pick = async (sql: string) => (await query<{ n: string }>(admin, sql, [names])).map((r) => r.n);
  return {
    databases: await pick('SELECT datname AS n FROM pg_database WHERE datname = ANY($1)'),
    roles: await pick("SELECT rolname AS n FROM pg_roles WHERE regexp_replace(rolname, '_ro$', '') = ANY($1)"),
    slots: await pick('SELECT slot_name AS n FROM pg_replication_slots WHERE slot_name = ANY($1)'),
  };
}

test('50 syncs created and deleted in a row leave no database, role or slot behind', async () => {
  const svc = await startTestService();
  try {
    // One sync per account: an account syncs one Stripe account once, and within its limits.
    const made: Array<{ id: string; name: string; token: string }> = [];
    for (let i = 0; i < 50; i++) {
      const account = await createAccount(svc, `tenant ${i}`);
      const answer = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
      assert.is(answer.status, 201, answer.text);
      made.push({ id: answer.body.id, name: answer.body.database.name, token: account.token });
    }
    const names = made.map((m) => m.name);
    const during = await leftovers(names);
    assert.is(during.databases.length, 50);
    assert.is(during.roles.length, 50);
    assert.is(during.slots.length, 50);
    for (const { id, token } of made) {
      const answer = await request(svc.api, 'DELETE', `/api/syncs/${id}`, { token });
      assert.is(answer.status, 200, answer.text);
    }
    assert.equal(await leftovers(names), { databases: [], roles: [], slots: [] });
    const rows = await query(svc.controlUrl, 'SELECT id FROM syncs');
    assert.equal(rows, []);
  } finally {
    await svc.stop();
  }
});

test('a create or delete cut short by a crash is finished at the next start', async () => {
  const svc = await startTestService();
  const account = await createAccount(svc);
  const deleting = (await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() })).body;
  await svc.service.stop();
  await svc.airtable.close();
  await svc.stripe?.close();

  // As a crash would leave them: one row mid-delete, one mid-create with half a database.
  await query(svc.controlUrl, "UPDATE syncs SET state = 'deleting' WHERE id = $1", [deleting.id]);
  const halfName = newDatabaseName();
  await query(
    svc.controlUrl,
    `INSERT INTO syncs (id, account_id, kind, api_key_enc, settings, database_name, database_role, database_password_enc)
     VALUES ('syn_halfmade000000', $1, 'stripe', 'v1:x:x:x', '{}', $2, $3, 'v1:x:x:x')`,
    [account.id, halfName, `${halfName}_ro`],
  );
  await provisionDatabase({ adminUrl: serverAdminUrl(), name: halfName, role: `${halfName}_ro` }, 'pw-of-a-half-made-database', fileLogger());

  const again = await startTestService({ config: { databaseUrl: svc.controlUrl, adminToken: svc.adminToken } });
  try {
    assert.equal(await query(again.controlUrl, 'SELECT id FROM syncs'), []);
    assert.equal(await leftovers([deleting.database.name, halfName]), { databases: [], roles: [], slots: [] });
  } finally {
    await again.stop();
  }
});

test.run();
