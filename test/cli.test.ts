import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { freePort } from './harness/ports.ts';
import { startSecondServer } from './harness/second-server.ts';
import { spawnTributary } from './harness/process.ts';
import { airtableSyncBody, createAccount, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;
test.before(async () => {
  svc = await startTestService();
});
test.after(async () => svc.stop());

/** `env` replaces the token variable the helper sets (an undefined value unsets it). */
async function cli(args: string[], options: { token?: string; input?: string; env?: NodeJS.ProcessEnv } = {}) {
  const token = options.token ?? svc.adminToken;
  const proc = spawnTributary([...args], { TRIBUTARY_URL: svc.api, TRIBUTARY_TOKEN: token, ...options.env }, options.input);
  const code = await proc.exited;
  return { code, output: proc.output() };
}

/** Each row's cells by the header's column starts: an aligned table reads back into records. */
function readTable(output: string): Array<Record<string, string>> {
  const [header, ...rows] = output.trimEnd().split('\n');
  const starts = [...header!.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
  return rows.map((row) =>
    Object.fromEntries(
      starts.map((column, i) => {
        const cell = row.slice(column.at, starts[i + 1]?.at ?? row.length);
        // Aligned: in every row, the character before a column's start is a blank.
        assert.ok(column.at === 0 || row[column.at - 1] === ' ', `"${row}" is aligned at ${column.name}`);
        return [column.name, cell.trim()];
      }),
    ),
  );
}

test('--help lists every command, and each command has its own help', async () => {
  const top = await cli(['--help']);
  assert.is(top.code, 0);
  for (const command of [
    'run',
    'fake airtable',
    'fake stripe',
    'accounts create',
    'accounts list',
    'syncs create',
    'syncs list',
    'syncs show',
    'syncs settings',
    'syncs delete',
    'syncs watch',
    'servers add',
    'servers list',
    'servers show',
    'servers set',
    'servers remove',
  ]) {
    assert.ok(top.output.includes(`tributary ${command}`), `overview lists ${command}`);
    const own = await cli([...command.split(' '), '--help']);
    assert.is(own.code, 0, command);
    assert.match(own.output, new RegExp(`^tributary ${command}`), `${command} --help starts with its usage`);
  }
  const unknown = await cli(['teleport']);
  assert.is(unknown.code, 2);
  // One line, not the whole overview: where the commands are is said in it.
  assert.is(unknown.output, 'tributary: unknown command "teleport" (tributary --help lists the commands)\n');
  const unknownSub = await cli(['syncs', 'bogus']);
  assert.is(unknownSub.code, 2);
  assert.is(unknownSub.output, 'tributary: unknown command "syncs bogus" (tributary syncs --help lists its commands)\n');
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
  assert.equal(sync.settings, { turbo: true, connected_accounts: false });

  const listed = await cli(['syncs', 'list', '--json'], { token });
  assert.equal(
    JSON.parse(listed.output).data.map((s: { id: string }) => s.id),
    [sync.id],
  );

  const shown = await cli(['syncs', 'show', sync.id], { token });
  assert.is(JSON.parse(shown.output).database.name, sync.database.name);

  const changed = await cli(['syncs', 'settings', sync.id, '--turbo', 'false'], { token });
  assert.is(changed.code, 0, changed.output);
  assert.equal(JSON.parse(changed.output).settings, { turbo: false, connected_accounts: false });

  const deleted = await cli(['syncs', 'delete', sync.id, '--keep-database'], { token });
  assert.is(deleted.code, 0, deleted.output);
  assert.equal(JSON.parse(deleted.output), { id: sync.id, deleted: true, database_kept: true });
});

test('lists print an aligned table; --json prints the API answer unchanged', async () => {
  const account = await createAccount(svc, 'table-co');
  const bodies = [airtableSyncBody('appBBBBBBBBBBBBBB'), { ...stripeSyncBody(), api_key: 'sk_test_persist123' }];
  const syncs = await Promise.all(bodies.map((body) => request(svc.api, 'POST', '/api/syncs', { token: account.token, body })));
  assert.equal(
    syncs.map((answer) => answer.status),
    [201, 201],
    syncs.map((answer) => answer.text).join('\n'),
  );
  const ids = syncs.map((answer) => answer.body.id as string);

  const table = await cli(['syncs', 'list'], { token: account.token });
  assert.is(table.code, 0, table.output);
  assert.match(table.output, /^ID +KIND +NAME +STATUS +LAG +CREATED\n/);
  assert.not.match(table.output, /\x1b\[/, 'no colour when stdout is not a terminal');
  const rows = readTable(table.output);
  assert.equal(
    rows.map((r) => [r.ID, r.KIND]).sort(),
    [
      [ids[0], 'airtable'],
      [ids[1], 'stripe'],
    ].sort(),
  );
  assert.ok(
    rows.some((r) => r.NAME === 'Base BBB'),
    'the base name upstream',
  );
  for (const row of rows) {
    assert.is(row.STATUS, 'normal (first pass)', 'no sync role here: never run');
    assert.is(row.LAG, '-');
    assert.match(row.CREATED!, /^(just now|\d+s ago)$/);
  }

  const accounts = await cli(['accounts', 'list']);
  assert.is(accounts.code, 0, accounts.output);
  assert.match(accounts.output, /^ID +NAME +CREATED\n/);
  assert.ok(
    readTable(accounts.output).some((r) => r.ID === account.id && r.NAME === 'table-co'),
    accounts.output,
  );

  // Scripts: JSON equal to the API's own answer.
  for (const [args, route, token] of [
    [['syncs', 'list', '--json'], '/api/syncs', account.token],
    [['accounts', 'list', '--json'], '/api/accounts', svc.adminToken],
  ] as const) {
    const json = await cli([...args], { token });
    assert.is(json.code, 0, json.output);
    assert.equal(JSON.parse(json.output), (await request(svc.api, 'GET', route, { token })).body, args.join(' '));
  }

  // A new account's secrets are shown at creation, with or without --json.
  for (const flags of [[], ['--json']]) {
    const created = await cli(['accounts', 'create', '--name', `secrets-${flags.length}`, ...flags]);
    assert.is(created.code, 0, created.output);
    const answer = JSON.parse(created.output);
    assert.match(answer.api_token, /^trb_/);
    assert.ok(answer.events.password, 'event password shown');
  }
});

test('the pool of servers is managed from the CLI, its URLs read from stdin and never printed', async () => {
  const table = await cli(['servers', 'list']);
  assert.is(table.code, 0, table.output);
  assert.match(table.output, /^ID +REGION +SYNCS +CAPACITY +FREE +STATE +SERVER +WAL-BOUND\n/);
  const [first, ...others] = readTable(table.output);
  assert.equal(others, []);
  assert.equal([first!.REGION, first!.STATE, first!.SERVER, first!['WAL-BOUND']], ['us-west-2', 'open', 'configured', '1024 MB']);
  const json = await cli(['servers', 'list', '--json']);
  assert.equal(JSON.parse(json.output), (await request(svc.api, 'GET', '/api/servers', { token: svc.adminToken })).body);
  assert.equal(JSON.parse((await cli(['servers', 'show', first!.ID!])).output).id, first!.ID);

  const second = await startSecondServer();
  try {
    const password = new URL(second.adminUrl).password;
    const added = await cli(['servers', 'add', '-', '--region', 'eu', '--capacity', '2'], { input: `${second.adminUrl}\n` });
    assert.is(added.code, 0, added.output);
    const server = JSON.parse(added.output);
    assert.equal([server.region, server.capacity, server.free, server.configured], ['eu', 2, 2, false]);
    const twice = await cli(['servers', 'add', '-', '--region', 'eu', '--capacity', '2'], { input: `${second.adminUrl}\n` });
    assert.is(twice.code, 1);
    assert.is(twice.output, `tributary servers add: 409 conflict: url: this server is already in the pool as ${server.id}\n`);
    for (const output of [added.output, twice.output, (await cli(['servers', 'list'])).output]) assert.not.ok(output.includes(password));

    const drained = await cli(['servers', 'set', server.id, '--draining', 'true', '--capacity', '1']);
    assert.is(drained.code, 0, drained.output);
    assert.equal([JSON.parse(drained.output).draining, JSON.parse(drained.output).capacity], [true, 1]);
    const removed = await cli(['servers', 'remove', server.id]);
    assert.is(removed.code, 0, removed.output);
    assert.equal(JSON.parse(removed.output), { id: server.id, deleted: true });
  } finally {
    await second.stop();
  }

  const account = await createAccount(svc, 'regions-co');
  const nowhere = await cli(['syncs', 'create', '--kind', 'stripe', '--api-key', '-', '--region', 'mars'], {
    token: account.token,
    input: 'sk_test_fromstdin0000\n',
  });
  assert.is(nowhere.code, 1);
  assert.is(nowhere.output, 'tributary syncs create: 422 unprocessable: region mars: no server in this region can take a new sync\n');
  const notOperator = await cli(['servers', 'list'], { token: account.token });
  assert.is(notOperator.code, 1);
  assert.match(notOperator.output, /^tributary servers list: 403 forbidden: /);
  for (const args of [
    ['servers', 'add', '--region', 'eu', '--capacity', '1'],
    ['servers', 'set', first!.ID!],
    ['servers', 'remove'],
  ]) {
    const usage = await cli(args);
    assert.is(usage.code, 2, `${args.join(' ')}: ${usage.output}`);
  }
  const badCapacity = await cli(['servers', 'set', first!.ID!, '--capacity', 'lots']);
  assert.equal(
    [badCapacity.code, badCapacity.output.split('\n')[0]],
    [2, 'tributary servers set: --capacity takes a whole number (tributary servers set --help)'],
  );
});

test('a refused token is named by where it came from, never by its value', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-cli-'));
  try {
    await writeFile(path.join(dir, 'admin-token'), 'tra_wrong_from_file\n');
    const cases = [
      { source: '--token', args: ['--token', 'trb_wrong_flag'], env: {}, secret: 'trb_wrong_flag' },
      { source: '$TRIBUTARY_TOKEN', args: [], env: { TRIBUTARY_TOKEN: 'trb_wrong_var' }, secret: 'trb_wrong_var' },
      { source: '$TRIBUTARY_ADMIN_TOKEN', args: [], env: { TRIBUTARY_TOKEN: undefined, TRIBUTARY_ADMIN_TOKEN: 'tra_wrong_admin' }, secret: 'tra_wrong_admin' },
      { source: path.join(dir, 'admin-token'), args: [], env: { TRIBUTARY_TOKEN: undefined, TRIBUTARY_DATA_DIR: dir }, secret: 'tra_wrong_from_file' },
    ];
    for (const { source, args, env, secret } of cases) {
      const refused = await cli(['syncs', 'list', ...args], { env });
      assert.is(refused.code, 1, refused.output);
      assert.is(refused.output, `tributary syncs list: 401 unauthorized: the token from ${source} was refused (the token is not valid)\n`);
      assert.not.ok(refused.output.includes(secret), 'the token itself is not printed');
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('an account token on an operator command: the 403 says which token was used', async () => {
  const account = await cli(['accounts', 'create', '--name', 'forbidden-check', '--json']);
  assert.is(account.code, 0, account.output);
  const token = JSON.parse(account.output).api_token as string;
  const refused = await cli(['accounts', 'list'], { token });
  assert.is(refused.code, 1, refused.output);
  assert.match(refused.output, /^tributary accounts list: 403 forbidden: .*operator.* \(the token used is the one from \$TRIBUTARY_TOKEN\)\n$/);
  assert.not.ok(refused.output.includes(token), 'the token itself is not printed');
});

test('API errors and bad flags are reported on stderr with a non-zero exit', async () => {
  const missing = await cli(['syncs', 'show', 'syn_nothere000000000']);
  assert.is(missing.code, 1);
  assert.match(missing.output, /404 not_found: sync syn_nothere000000000 not found/);
  // A command line it cannot read is a usage error (2): one line naming the option.
  const badFlag = await cli(['syncs', 'list', '--bogus']);
  assert.is(badFlag.code, 2);
  assert.is(badFlag.output, 'tributary syncs list: unknown option --bogus (tributary syncs list --help)\n');
  // A missing sync id is the same kind of mistake.
  for (const command of ['show', 'settings', 'delete', 'watch']) {
    const unnamed = await cli(['syncs', command]);
    assert.is(unnamed.code, 2, `syncs ${command}: ${unnamed.output}`);
    assert.match(unnamed.output, `tributary syncs ${command}: name the sync`);
  }
  // So is an option value it cannot take: the help promises 2.
  const badBool = await cli(['syncs', 'settings', 'syn_x', '--turbo', 'maybe']);
  assert.is(badBool.code, 2);
  assert.match(badBool.output, /--turbo takes true or false/);
  const badLinks = await cli(['syncs', 'settings', 'syn_x', '--stable-attachment-links', 'yes please']);
  assert.is(badLinks.code, 2);
  assert.match(badLinks.output, /--stable-attachment-links takes true or false/);
  // Nothing listens there: the cause, not fetch's bare "fetch failed".
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const unreachable = await cli(['syncs', 'list'], { env: { TRIBUTARY_URL: nowhere } });
  assert.is(unreachable.code, 1);
  assert.match(unreachable.output, new RegExp(`^tributary syncs list: cannot reach ${nowhere} \\(ECONNREFUSED\\)`));
  const unknownWatch = await cli(['syncs', 'watch', 'syn_nothere000000000']);
  assert.is(unknownWatch.code, 1);
  assert.is(unknownWatch.output, 'tributary syncs watch: 404 not_found: sync syn_nothere000000000 not found\n');
});

test.run();
