/**
 * What the CLI says of a command line it cannot use, before it sends anything: one line that
 * names the option, and exit 2, as its help promises, not the API's answer and exit 1. No
 * service runs here: a request would fail to connect (exit 1), so exit 2 shows nothing was
 * sent. Before, `--debounce-ms abc` was sent (a 400, exit 1), an empty key read from standard
 * input came back as "must not contain white space", `accounts create` without `--name` was
 * a server error, and a usage error printed its usage line after it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { freePort } from './harness/ports.ts';
import { spawnTributary } from './harness/process.ts';

let nowhere: string;
test.before(async () => {
  nowhere = `http://127.0.0.1:${await freePort()}`;
});

async function cli(args: string[]) {
  const proc = spawnTributary(args, { TRIBUTARY_URL: nowhere, TRIBUTARY_TOKEN: 'trb_not_used' });
  const code = await proc.exited;
  return { code, output: proc.output() };
}

const cases: Array<[string[], RegExp]> = [
  [['syncs', 'settings', 'syn_x', '--turbo', 'yes'], /--turbo takes true or false/],
  [['syncs', 'create', '--kind', 'airtable', '--base-id', 'appX'], /--api-key takes the upstream's key, or - to read it from standard input/],
  [['syncs', 'create', '--api-key', 'k'], /--kind names the kind of sync/],
  [['syncs', 'create', '--kind', 'stripe', '--api-key', 'k', '--settings', '{turbo'], /--settings takes JSON/],
  [['fake', 'stripe', '--late-events', '2:100'], /--late-events takes SHARE:MS/],
  [['fake', 'stripe', '--late-events', '0.1:0'], /--late-events takes SHARE:MS/],
  [['syncs', 'settings', 'syn_x', '--debounce-ms', 'abc'], /--debounce-ms takes a whole number from 0 to 86400000/],
  [['syncs', 'settings', 'syn_x', '--debounce-ms', '1e3'], /--debounce-ms takes a whole number/],
  [['syncs', 'settings', 'syn_x', '--debounce-ms', '90000000'], /--debounce-ms takes a whole number from 0 to 86400000/],
  [['syncs', 'settings', 'syn_x', '--lookup-as', 'json'], /--lookup-as takes text or text\[\]/],
  [['syncs', 'create', '--kind', 'stripe', '--api-key', ''], /--api-key is empty/],
  [['accounts', 'create'], /--name names the account/],
  [['accounts', 'create', '--name', '  '], /--name names the account/],
  [['servers', 'add', 'postgres://a@b:5432/postgres', '--region', 'eu', '--capacity', 'ten'], /--capacity takes a whole number/],
  [['syncs', 'watch', 'syn_x', '--interval', '0'], /--interval takes a number of seconds above 0/],
];

for (const [args, message] of cases) {
  test(`tributary ${args.join(' ')}: a usage error, exit 2, nothing sent`, async () => {
    const { code, output } = await cli(args);
    assert.is(code, 2, output);
    assert.match(output, message);
    const command = args.slice(0, 2).join(' ');
    assert.is(output.split('\n').filter(Boolean).length, 1, `one line: ${output}`);
    assert.ok(output.endsWith(`(tributary ${command} --help)\n`), output);
  });
}

test('an empty key on standard input is said so, before anything is sent', async () => {
  const proc = spawnTributary(['syncs', 'create', '--kind', 'stripe', '--api-key', '-'], { TRIBUTARY_URL: nowhere, TRIBUTARY_TOKEN: 'trb_not_used' }, '\n');
  assert.is(await proc.exited, 2, proc.output());
  assert.is(proc.output(), 'tributary syncs create: --api-key -: standard input held no key (tributary syncs create --help)\n');
});

test('a group of commands alone lists its commands; with --help too, on stdout and exit 0', async () => {
  const bare = await cli(['webhooks']);
  assert.is(bare.code, 2, bare.output);
  assert.match(bare.output, /tributary webhooks commands:/);
  assert.match(bare.output, /tributary webhooks rotate-secret/);
  const help = await cli(['accounts', '--help']);
  assert.is(help.code, 0, help.output);
  assert.match(help.output, /tributary accounts create/);
  assert.not.match(help.output, /unknown command/);
});

test.run();
