/**
 * The closed beta with a waiting list. With TRIBUTARY_WAITING_LIST_KINDS=airtable, an account
 * not admitted that tries to create an Airtable sync gets a 403 `waiting_list`, nothing is
 * made, and it is on the list from then on; Stripe syncs are not held back; the operator lists,
 * admits and removes (API and CLI); an admitted account creates at once, a removed one is held
 * back again while its sync keeps running. The console's Connect page says where the account
 * stands instead of offering a form that fails. Bad input gets a clear 4xx and changes nothing.
 * Before, nothing admitted or queued anyone: the console only said "closed beta".
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { launchBrowser } from './harness/browser.ts';
import { spawnTributary } from './harness/process.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  loudSetUp,
  request,
  startTestService,
  stripeSyncBody,
  TEST_BASES,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

let svc: TestService;
let ada: TestAccount;
let bob: TestAccount;

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({ config: { roles: ['api', 'sync'], waitingListKinds: ['airtable'] } });
      ada = await createAccount(svc, 'ada');
      bob = await createAccount(svc, 'bob');
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

const airtable = (base = TEST_BASES[0]!) => ({ kind: 'airtable', base_id: base, api_key: AIRTABLE_TEST_TOKEN });
const as = (account: TestAccount | 'admin') => ({ token: account === 'admin' ? svc.adminToken : account.token });
const syncsOf = async (account: TestAccount) => (await request(svc.api, 'GET', '/api/syncs', as(account))).body.data as Array<{ id: string; kind: string }>;

async function cli(args: string[]) {
  const proc = spawnTributary(args, { TRIBUTARY_URL: svc.api, TRIBUTARY_TOKEN: svc.adminToken });
  const code = await proc.exited;
  return { code, output: proc.output() };
}

test('an account not admitted gets 403 waiting_list, nothing made, and is on the list; Stripe is open', async () => {
  const first = await request(svc.api, 'POST', '/api/syncs', { ...as(ada), body: airtable() });
  assert.is(first.status, 403, first.text);
  assert.is(first.body.error.code, 'waiting_list');
  assert.match(first.body.error.message, /^airtable syncs are in a closed beta with a waiting list: this account is on it since \d{4}-/);
  assert.equal(await syncsOf(ada), []);
  const mine = await request(svc.api, 'GET', '/api/waiting-list', as(ada));
  assert.is(mine.status, 200, mine.text);
  assert.equal(mine.body.kinds, ['airtable']);
  assert.is(mine.body.data.length, 1);
  assert.equal([mine.body.data[0].account_id, mine.body.data[0].state, mine.body.data[0].admitted_at], [ada.id, 'waiting', null]);
  // Asking again keeps the first ask's place.
  const again = await request(svc.api, 'POST', '/api/syncs', { ...as(ada), body: airtable() });
  assert.is(again.status, 403);
  const joined = await request(svc.api, 'POST', '/api/waiting-list', { ...as(ada), body: { kind: 'airtable' } });
  assert.is(joined.status, 200, joined.text);
  assert.is(joined.body.asked_at, mine.body.data[0].asked_at);
  // Stripe syncs are not behind the list.
  const stripe = await request(svc.api, 'POST', '/api/syncs', { ...as(ada), body: stripeSyncBody() });
  assert.is(stripe.status, 201, stripe.text);
  // An account sees only its own entries.
  assert.equal((await request(svc.api, 'GET', '/api/waiting-list', as(bob))).body.data, []);
  const peek = await request(svc.api, 'GET', `/api/waiting-list?account_id=${ada.id}`, as(bob));
  assert.is(peek.status, 403, peek.text);
});

test('bad input: a clear 4xx, nothing changed', async () => {
  const before = (await request(svc.api, 'GET', '/api/waiting-list', as('admin'))).body.data;
  const cases: Array<[string, string, TestAccount | 'admin', unknown, number, RegExp]> = [
    ['POST', `/api/waiting-list/stripe/${bob.id}/admit`, 'admin', undefined, 400, /kind: stripe has no waiting list \(the listed kinds: airtable\)/],
    ['POST', '/api/waiting-list/airtable/acc_nobody/admit', 'admin', undefined, 404, /account acc_nobody/],
    ['POST', `/api/waiting-list/airtable/${bob.id}/admit`, bob, undefined, 403, /operator/],
    ['DELETE', `/api/waiting-list/airtable/${bob.id}`, 'admin', undefined, 404, /not found|on the airtable waiting list/],
    ['DELETE', `/api/waiting-list/airtable/${ada.id}`, ada, undefined, 403, /operator/],
    ['POST', '/api/waiting-list', 'admin', { kind: 'airtable' }, 403, /with its own token/],
    ['POST', '/api/waiting-list', bob, { kind: 'stripe' }, 400, /kind: stripe has no waiting list/],
    ['POST', '/api/waiting-list', bob, { kind: 'airtable', extra: 1 }, 400, /extra/],
    ['POST', '/api/waiting-list', bob, { kind: '' }, 400, /kind/],
    ['GET', '/api/waiting-list?state=maybe', 'admin', undefined, 400, /state/],
    ['GET', '/api/waiting-list?nope=1', 'admin', undefined, 400, /nope/],
  ];
  for (const [method, path, who, body, status, message] of cases) {
    const answer = await request(svc.api, method, path, { ...as(who), ...(body === undefined ? {} : { body }) });
    assert.is(answer.status, status, `${method} ${path}: ${answer.text}`);
    assert.match(answer.body.error.message, message, `${method} ${path}`);
  }
  assert.equal((await request(svc.api, 'GET', '/api/waiting-list', as('admin'))).body.data, before);
});

test('the operator lists and admits from the CLI; an admitted account creates at once; a removed one waits again', async () => {
  const listed = await cli(['waiting-list', 'list', '--kind', 'airtable']);
  assert.is(listed.code, 0, listed.output);
  assert.match(listed.output, new RegExp(`airtable\\s+${ada.id}\\s+ada\\s+waiting`));
  const json = JSON.parse((await cli(['waiting-list', 'list', '--state', 'waiting', '--json'])).output);
  assert.equal(
    json.data.map((e: { account_id: string }) => e.account_id),
    [ada.id],
  );
  const admitted = await cli(['waiting-list', 'admit', ada.id, '--kind', 'airtable']);
  assert.is(admitted.code, 0, admitted.output);
  assert.is(JSON.parse(admitted.output).state, 'admitted');
  const made = await request(svc.api, 'POST', '/api/syncs', { ...as(ada), body: airtable() });
  assert.is(made.status, 201, made.text);
  // Admitting one who never asked works too.
  assert.is(JSON.parse((await cli(['waiting-list', 'admit', bob.id, '--kind', 'airtable'])).output).state, 'admitted');

  const removed = await cli(['waiting-list', 'remove', ada.id, '--kind', 'airtable']);
  assert.is(removed.code, 0, removed.output);
  assert.equal(JSON.parse(removed.output), { account_id: ada.id, kind: 'airtable', removed: true });
  const held = await request(svc.api, 'POST', '/api/syncs', { ...as(ada), body: airtable(TEST_BASES[1]) });
  assert.is(held.status, 403, held.text);
  assert.is(held.body.error.code, 'waiting_list');
  // Its sync keeps running.
  const view = await request(svc.api, 'GET', `/api/syncs/${made.body.id}`, as(ada));
  assert.is(view.status, 200);
  // Bad command lines are caught before anything is sent.
  for (const args of [
    ['waiting-list', 'admit', ada.id],
    ['waiting-list', 'admit', '--kind', 'airtable'],
    ['waiting-list', 'list', '--state', 'maybe'],
  ]) {
    const bad = await cli(args);
    assert.is(bad.code, 2, `${args.join(' ')}: ${bad.output}`);
    assert.is(bad.output.split('\n').filter(Boolean).length, 1, bad.output);
  }
});

test("the console's Connect page tells a waiting account where it stands, and puts it on the list", async () => {
  const carol = await createAccount(svc, 'carol');
  const browser = await launchBrowser();
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${svc.api}/`);
    await page.getByLabel('API token', { exact: true }).fill(carol.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Syncs' }).waitFor();
    await page.evaluate(() => (location.hash = '#/connect'));
    const block = page.locator('.waiting-list');
    await block.waitFor();
    assert.match((await block.textContent()) ?? '', /closed beta with a waiting list/);
    assert.is(await page.getByLabel('Base ID').count(), 0, 'no form that would fail');
    assert.ok(!(await page.getByRole('button', { name: 'Connect' }).isVisible()), 'no Connect button for Airtable');
    await page.getByRole('button', { name: 'Join the waiting list' }).click();
    await block.getByText('This account is on it since').waitFor();
    const mine = (await request(svc.api, 'GET', '/api/waiting-list', as(carol))).body.data;
    assert.is(mine.length, 1);
    // Stripe stays open: its form is there.
    await page.getByLabel('Stripe account').check();
    assert.ok(await page.getByRole('button', { name: 'Connect' }).isVisible());
    assert.equal(errors, []);
  } finally {
    await browser.close();
  }
});

test('a waiting-list kind that is no kind of sync stops the start with a clear message', async () => {
  const error = await startTestService({ config: { roles: ['api'], waitingListKinds: ['airtabel'] } }).then(
    (started) => started.stop().then(() => undefined),
    (thrown: Error) => thrown,
  );
  assert.ok(error, 'the service started');
  assert.match(error!.message, /TRIBUTARY_WAITING_LIST_KINDS: airtabel is not a kind of sync/);
});

test.run();
