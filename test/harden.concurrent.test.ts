/**
 * Every process of a fleet hardens the configured server at start (REVOKE CONNECT on the
 * maintenance databases). Processes started together did that at the same moment, and
 * PostgreSQL refuses a second concurrent update of one catalogue row ("tuple concurrently
 * updated"): one of them failed to start. Found by test/fleet.test.ts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { hardenServer } from '../src/control/provisioner.ts';
import { query } from './harness/postgres.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';

let server: SecondServer;

test.before(async () => {
  server = await startSecondServer();
});

test.after(async () => {
  await server?.stop();
});

test('many processes hardening one server at once all succeed', async () => {
  for (let round = 0; round < 10; round++) {
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => hardenServer(server.adminUrl)));
    const failed = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
    assert.equal(failed, [], `round ${round}`);
  }
  const open = await query<{ datname: string }>(
    server.adminUrl,
    "SELECT datname FROM pg_database WHERE datname IN ('postgres', 'template1') AND has_database_privilege('public', oid, 'CONNECT')",
  );
  assert.equal(open, [], 'PUBLIC may connect to neither');
});

test.run();
