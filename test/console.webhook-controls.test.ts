/**
 * The console's webhook controls in a real browser (the headless Chromium of
 * @sparticuz/chromium) against the whole service and an Airtable sync of the fake: a
 * destination disabled by a 410 shows why and is enabled again from the page; a filter is
 * edited (the API's refusal shown, then saved); a webhook is disabled and enabled; the secret
 * is rotated and shown once, and it verifies the next delivery; recovery refuses a time in the
 * future with the API's message and sends events again for a good one; a new webhook takes a
 * filter and a backfill. Screenshots go to test-artifacts/console-webhook-controls/.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Locator, Page } from 'playwright-core';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { launchBrowser, screenshot } from './harness/browser.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';
import { type SignedDelivery, verifies } from './harness/standard-webhooks.ts';

const SHOTS = 'console-webhook-controls';
const BASE = 'appBBBBBBBBBBBBBB';

let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let browser: Browser;
let page: Page;
let receiver: http.Server;
let origin: string;

type Delivery = SignedDelivery & { path: string; event: { event: string; data: Record<string, unknown> } };
const received: Delivery[] = [];
/** What each path answers: the "gone" destination says 410 until the test changes it. */
const answers = new Map<string, number>([['/gone', 410]]);
let live: { id: string; secret: string; url: string };
let gone: { id: string; url: string };

const api = (method: string, route: string, body?: unknown) => request(svc!.api, method, route, { token: account.token, body });

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
        tunables: { airtable: { pollIntervalMs: 200, cycleGapMs: 200 }, workerTickMs: 200 },
      });
      account = await createAccount(svc, 'console-hooks-co');
      const base = svc.airtable.base(BASE);
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Status', type: 'singleLineText' },
        { name: 'Points', type: 'number', options: { precision: 0 } },
      ]);
      base.createRecords('Tasks', [
        { Name: 'Plan', Status: 'open', Points: 1 },
        { Name: 'Ship', Status: 'done', Points: 5 },
      ]);
      const sync = await createAirtableSync(svc, account, BASE);
      syncId = sync.id;

      receiver = http.createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          const header = (name: string) => String(req.headers[name]);
          const path = req.url ?? '';
          received.push({
            path,
            id: header('webhook-id'),
            timestamp: header('webhook-timestamp'),
            signature: header('webhook-signature'),
            body,
            event: JSON.parse(body),
          });
          res.writeHead(answers.get(path) ?? 204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      origin = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
      const topics = [`svc.${syncId}.tasks`];
      const made = await api('POST', `/api/syncs/${syncId}/webhooks`, { url: `${origin}/live`, topics });
      live = { id: made.body.id, secret: made.body.secret, url: `${origin}/live` };
      gone = { id: (await api('POST', `/api/syncs/${syncId}/webhooks`, { url: `${origin}/gone`, topics })).body.id, url: `${origin}/gone` };
      // A change reaches both: the one answering 410 is disabled at once.
      await changeTask('Plan', { Points: 2 });
      await waitFor(
        'the 410 destination disabled',
        async () => ((await api('GET', `/api/syncs/${syncId}/webhooks/${gone.id}`)).body.state === 'disabled' ? true : undefined),
        20_000,
      );

      browser = await launchBrowser();
      page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
      page.on('pageerror', (error) => process.stderr.write(`page error: ${error.message}\n`));
      await page.goto(`${svc.api}/`);
      await page.getByLabel('API token', { exact: true }).fill(account.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Syncs' }).waitFor();
      await page.evaluate((id) => (location.hash = `#/syncs/${id}/webhooks`), syncId);
      await page.getByLabel('Destination URL').waitFor();
    },
    () => svc,
  ),
);

test.after(async () => {
  await browser?.close();
  receiver?.close();
  await svc?.stop();
});

/** Changes a task upstream and waits until its event is in the event log. */
async function changeTask(name: string, fields: Record<string, unknown>): Promise<void> {
  const base = svc!.airtable.base(BASE);
  base.updateRecord('Tasks', base.records('Tasks').find((r) => r.fields.Name === name)!.id, fields);
  assert.is((await api('GET', `/api/wait/${syncId}?timeout=30000`)).body.ok, true);
}

const cardOf = (url: string): Locator => page.locator('article.webhook', { has: page.locator('h3', { hasText: url }) });
const webhook = async (id: string) => (await api('GET', `/api/syncs/${syncId}/webhooks/${id}`)).body;

/** Every form control has a label (or an aria-label); every button and link has a name. */
async function assertLabelled(where: string): Promise<void> {
  const unlabelled = await page.evaluate(() => {
    const out: string[] = [];
    for (const el of document.querySelectorAll('input, select, textarea')) {
      const control = el as HTMLInputElement;
      if ((control.labels?.length ?? 0) === 0 && !control.getAttribute('aria-label') && !control.getAttribute('aria-labelledby'))
        out.push(control.outerHTML.slice(0, 80));
    }
    for (const button of document.querySelectorAll('button, a')) {
      if (!(button.textContent ?? '').trim() && !button.getAttribute('aria-label')) out.push(button.outerHTML.slice(0, 80));
    }
    return out;
  });
  assert.equal(unlabelled, [], `unlabelled controls on ${where}`);
}

test('a destination that answered 410 is shown disabled, with the reason and when; Enable resumes it', async () => {
  const card = cardOf(gone.url);
  await card.locator('.badge-disabled', { hasText: 'Disabled' }).waitFor();
  const reason = card.locator('.webhook-disabled');
  assert.match((await reason.textContent()) ?? '', /^Disabled (just now|\d+(\.\d)? s ago): it answered 410 Gone\./);
  assert.ok(await reason.locator('time').getAttribute('datetime'), 'the exact time is there');
  assert.is(await card.getByRole('button', { name: 'Disable' }).count(), 0);
  await screenshot(page, SHOTS, '01-disabled-by-410');
  await assertLabelled('webhooks');

  // Fixed at the receiver, enabled from the page: the event that got the 410 comes again.
  answers.set('/gone', 204);
  await card.getByRole('button', { name: 'Enable' }).click();
  await card.locator('.badge-enabled').waitFor();
  assert.is((await webhook(gone.id)).state, 'enabled');
  // The event that got the 410 is the first one sent there: on a busy machine the sync's first
  // inserts reach the log after the webhooks were made, and it was one of them, not the update.
  const refusedId = received.find((d) => d.path === '/gone')!.id;
  const tries = () => received.filter((d) => d.path === '/gone' && d.id === refusedId).length;
  await waitFor('the event that got the 410, delivered', async () => (tries() >= 2 ? true : undefined), 20_000);
  await card.getByRole('button', { name: 'Disable' }).waitFor();
});

test('the filter and rate are edited in a form; the API’s refusal is shown; the card says the filter in words', async () => {
  const card = cardOf(live.url);
  await card.getByText('Filter: none: every event of its topics is sent').waitFor();
  const edit = card.getByRole('button', { name: 'Edit filter and rate' });
  await edit.click();
  assert.is(await edit.getAttribute('aria-expanded'), 'true');
  await card.getByLabel('updated', { exact: true }).check();
  await card.getByLabel('Only updates that changed').fill('points');
  await card.getByRole('button', { name: 'Add a condition' }).click();
  await card.getByLabel('Column of condition 1').fill('stauts');
  await card.getByLabel('Value of condition 1').fill('open');
  await card.getByLabel('Max attempts per second').fill('20');
  // A refresh of the list (every 3 s) leaves the form as it is being filled in.
  await page.waitForTimeout(3500);
  assert.is(await card.getByLabel('Column of condition 1').inputValue(), 'stauts');
  await card.getByRole('button', { name: 'Save filter and rate' }).click();
  await card.getByRole('alert').filter({ hasText: `Not saved: filter: column "stauts" is in none of the webhook's collections (tasks)` }).waitFor();
  await screenshot(page, SHOTS, '02-filter-refused');
  assert.is((await webhook(live.id)).filter, null, 'nothing was changed');

  await card.getByLabel('Column of condition 1').fill('status');
  await card.getByRole('button', { name: 'Save filter and rate' }).click();
  await card.getByText('Filter: only updated events; updates only when points changed; only where status = "open"').waitFor();
  await card.getByText('Rate: at most 20 attempts a second').waitFor();
  const saved = await webhook(live.id);
  assert.equal([saved.filter, saved.max_per_second], [{ events: ['updated'], changed: ['points'], where: { status: 'open' } }, 20]);
  assert.is(await card.getByLabel('Column of condition 1').count(), 0, 'the form is closed');

  // Opened again, the form holds the filter as it is.
  await edit.click();
  assert.ok(await card.getByLabel('updated', { exact: true }).isChecked());
  assert.not.ok(await card.getByLabel('inserted', { exact: true }).isChecked());
  assert.is(await card.getByLabel('Only updates that changed').inputValue(), 'points');
  assert.is(await card.getByLabel(/^Operator of condition/).inputValue(), 'eq');
  await assertLabelled('the filter form');
  await screenshot(page, SHOTS, '03-filter-form');
  await card.getByRole('button', { name: 'Cancel' }).click();
  await page.waitForFunction(() => document.activeElement?.textContent === 'Edit filter and rate');
});

test('Disable, then Enable: the state follows, and the badge says it', async () => {
  const card = cardOf(live.url);
  await card.getByRole('button', { name: 'Disable' }).click();
  await card.locator('.webhook-disabled', { hasText: 'disabled by request' }).waitFor();
  assert.equal([(await webhook(live.id)).state, (await webhook(live.id)).disabled_reason], ['disabled', 'disabled by request']);
  await screenshot(page, SHOTS, '04-disabled-by-request');
  await card.getByRole('button', { name: 'Enable' }).click();
  await card.locator('.badge-enabled').waitFor();
  assert.is((await webhook(live.id)).state, 'enabled');
});

test('Rotate secret: the new one is shown once, with the old one’s expiry, and it signs the next delivery', async () => {
  const card = cardOf(live.url);
  await card.getByRole('button', { name: 'Rotate secret' }).click();
  assert.ok(await card.getByLabel(/Keeps signing beside the new one for 24 hours/).isChecked(), '24 h is the default');
  await card.getByRole('button', { name: 'Make a new secret' }).click();
  const shown = card.locator('.webhook-panel .notice-ok');
  await shown.getByText('It is shown only this once: copy it now.').waitFor();
  const secret = (await shown.locator('code').textContent()) ?? '';
  assert.match(secret, /^whsec_/);
  assert.is.not(secret, live.secret);
  const expiry = await shown.locator('.previous-expiry time').getAttribute('datetime');
  assert.is(expiry, (await webhook(live.id)).previous_secret_expires_at);
  assert.ok(Math.abs(Date.parse(expiry!) - Date.now() - 86_400_000) < 60_000, 'a day from now');
  await shown.getByRole('button', { name: 'Copy new webhook secret' }).waitFor();
  await screenshot(page, SHOTS, '05-new-secret');

  const before = received.length;
  await changeTask('Plan', { Points: 3 });
  const delivery = await waitFor('a delivery', async () => received.slice(before).find((d) => d.path === '/live'), 20_000);
  assert.ok(verifies(secret, delivery), 'the secret shown signs it');
  assert.ok(verifies(live.secret, delivery), 'the old one too, for a day');

  await shown.getByRole('button', { name: 'I have copied it' }).click();
  await card.locator('.webhook-panel .notice-ok').waitFor({ state: 'detached' });
  assert.not.ok((await page.content()).includes(secret), 'never shown again');

  // Dropped now: the answer says so.
  await card.getByRole('button', { name: 'Rotate secret' }).click();
  await card.getByLabel('Stops signing now').check();
  await card.getByRole('button', { name: 'Make a new secret' }).click();
  await card.getByText('The old secret no longer signs: deliveries carry the new signature only.').waitFor();
  live.secret = (await card.locator('.webhook-panel .notice-ok code').textContent()) ?? '';
  assert.is((await webhook(live.id)).previous_secret_expires_at, null);
  await card.getByRole('button', { name: 'I have copied it' }).click();
});

test('Recover since…: a time in the future is the API’s 422 at the field; a good one sends the events again', async () => {
  const card = cardOf(live.url);
  await card.getByRole('button', { name: 'Recover since…' }).click();
  await card.getByText(/Every event of its topics logged since then .* is sent again/).waitFor();
  const since = card.getByLabel('Send again every event since');
  const local = (date: Date) => new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  await since.fill(local(new Date(Date.now() + 2 * 3_600_000)));
  await card.getByRole('button', { name: 'Recover', exact: true }).click();
  await card
    .getByRole('alert')
    .filter({ hasText: /^Not recovered: since: \S+ is in the future$/ })
    .waitFor();
  assert.is(await since.getAttribute('aria-invalid'), 'true');
  assert.match((await card.locator('.field-error').textContent()) ?? '', /is in the future/);
  await screenshot(page, SHOTS, '06-recover-refused');

  const before = received.length;
  await since.fill(local(new Date(Date.now() - 3_600_000)));
  await card.getByRole('button', { name: 'Recover', exact: true }).click();
  await page.locator('#toast', { hasText: /^Recovering: every event since / }).waitFor();
  // The updates of Plan the filter takes (points changed, status open) are sent again.
  const again = await waitFor(
    'the events sent again',
    async () => {
      const points = received
        .slice(before)
        .filter((d) => d.path === '/live')
        .map((d) => d.event.data.points);
      return points.includes(2) && points.includes(3) ? points : undefined;
    },
    20_000,
  );
  assert.ok(again.length >= 2);
  for (const d of received.slice(before).filter((x) => x.path === '/live')) assert.ok(verifies(live.secret, d));
});

test('a new destination takes a filter, a rate and "backfill its current rows first"', async () => {
  await page.getByLabel('Destination URL').fill(`${origin}/new`);
  await page.getByLabel(`svc.${syncId}.tasks`).check();
  await page.getByText('Filter and rate (optional)').click();
  const form = page.locator('form', { has: page.getByRole('button', { name: 'Add webhook' }) });
  await form.getByLabel('read (rows sent by a backfill)').check();
  await form.getByRole('button', { name: 'Add a condition' }).click();
  await form.getByLabel('Column of condition 1').fill('status');
  await form.getByLabel('Operator of condition 1').selectOption('in');
  await form.getByLabel('Value of condition 1').fill('open, blocked');
  await form.getByLabel('Max attempts per second').fill('5');
  await form.getByLabel('Backfill its current rows first').check();
  await assertLabelled('the add form');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.getByText(/^Backfill bf_\w+ started: its current rows are sent to it first\./).waitFor();
  const card = cardOf(`${origin}/new`);
  await card.getByText('Filter: only read events; only where status is one of "open", "blocked"').waitFor();
  await card.getByText('Rate: at most 5 attempts a second').waitFor();
  // Only the open task is read to it.
  const read = await waitFor('the read', async () => received.find((d) => d.path === '/new'), 20_000);
  assert.equal([read.event.event, read.event.data.name], ['read', 'Plan']);
  await page.waitForTimeout(500);
  assert.is(received.filter((d) => d.path === '/new').length, 1);
  await screenshot(page, SHOTS, '07-added-with-filter');
});

test.run();
