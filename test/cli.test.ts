import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnTributary } from './harness/process.ts';
import { startTestService, type TestService } from './harness/service.ts';

let svc: TestService;
test.before(async () => {
  svc = await startTestService();
});
test.after(async () => svc.stop());

async function cli(args: string[], options: { token?: string; input?: string } = {}) {
  const token = options.token ?? svc.adminToken;
  const proc = spawnTributary([...args], { TRIBUTARY_URL: svc.api, TRIBUTARY_TOKEN: token }, options.input);
  const code = await proc.exited;
  return { code, output: proc.output() };
}

test('--help lists every command, and each command has its own help', async () => {
  const top = await cli(['--help']);
  assert.is(top.code, 0);
  for (const command of ['run', 'fake airtable', 'fake stripe', 'accounts create', 'syncs create', 'syncs list', 'syncs show', 'syncs settings', 'syncs delete']) {
    assert.ok(top.output.includes(`tributary ${command}`), `overview lists ${command}`);
    const own = await cli([...command.split(' '), '--help']);
    assert.is(own.code, 0, command);
    assert.match(own.output, new RegExp(`^tributary ${command}`), `${command} --help starts with its usage`);
  }
  const unknown = await cli(['teleport']);
  assert.is(unknown.code, 2);
  assert.match(unknown.output, /unknown command "teleport"/);
  assert.match(unknown.output, /Commands:/);
  const unknownSub = await cli(['syncs', 'bogus']);
  assert.is(unknownSub.code, 2);
  assert.match(unknownSub.output, /unknown command "syncs bogus"/);
});

test('accounts and syncs are managed end to end from the CLI', async () => {
  const account = await cli(['accounts', 'create', '--name', 'cli-co']);
  assert.is(account.code, 0, account.output);
  const token = JSON.parse(account.output).api_token as string;

  const created = await cli(['syncs', 'create', '--kind', 'stripe', '--api-key', '-', '--settings', '{"turbo":true}'], {
    token,
    input: 'sk_test_fromstdin0000\n',
  });
  assert.is(created.code, 0, created.output);
  const sync = JSON.parse(created.output);
  assert.equal(sync.settings, { turbo: true });

  const listed = await cli(['syncs', 'list'], { token });
  assert.equal(JSON.parse(listed.output).data.map((s: { id: string }) => s.id), [sync.id]);

  const shown = await cli(['syncs', 'show', sync.id], { token });
  assert.is(JSON.parse(shown.output).database.name, sync.database.name);

  const changed = await cli(['syncs', 'settings', sync.id, '--turbo', 'false'], { token });
  assert.is(changed.code, 0, changed.output);
  assert.equal(JSON.parse(changed.output).settings, { turbo: false });

  const deleted = await cli(['syncs', 'delete', sync.id, '--keep-database'], { token });
  assert.is(deleted.code, 0, deleted.output);
  assert.equal(JSON.parse(deleted.output), { id: sync.id, deleted: true, database_kept: true });
});

test('API errors and bad flags are reported on stderr with a non-zero exit', async () => {
  const missing = await cli(['syncs', 'show', 'syn_nothere000000000']);
  assert.is(missing.code, 1);
  assert.match(missing.output, /404 not_found: sync syn_nothere000000000 not found/);
  // A command line it cannot read is a usage error (2), naming the option and the usage.
  const badFlag = await cli(['syncs', 'list', '--bogus']);
  assert.is(badFlag.code, 2);
  assert.match(badFlag.output, /--bogus/);
  assert.match(badFlag.output, /tributary syncs list/);
  const badBool = await cli(['syncs', 'settings', 'syn_x', '--turbo', 'maybe']);
  assert.is(badBool.code, 1);
  assert.match(badBool.output, /--turbo takes true or false/);
  const wrongToken = await cli(['syncs', 'list'], { token: 'trb_wrong' });
  assert.is(wrongToken.code, 1);
  assert.match(wrongToken.output, /401 unauthorized/);
});

test.run();
