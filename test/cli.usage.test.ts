/**
 * What the CLI says of a command line it cannot use, before it sends anything: a usage line
 * and exit 2, as its help promises, not the API's answer and exit 1. No service runs here: a
 * request would fail to connect (exit 1), so exit 2 shows nothing was sent.
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
];

for (const [args, message] of cases) {
  test(`tributary ${args.join(' ')}: a usage error, exit 2, nothing sent`, async () => {
    const { code, output } = await cli(args);
    assert.is(code, 2, output);
    assert.match(output, message);
    assert.match(output, /\ntributary (syncs (settings|create)|fake stripe) /, 'the usage line follows');
  });
}

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
