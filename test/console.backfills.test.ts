/**
 * The console's Backfills tab in a real browser (the headless Chromium of @sparticuz/chromium)
 * against the whole service (api, sync, decoder, events) and an Airtable sync of the fake:
 * start a backfill, see its progress while it runs and "done" when it ends, cancel one, read
 * the API's refusal at the field, and backfill one webhook from the Webhooks tab, whose
 * destination then receives every row. Screenshots go to test-artifacts/console-backfills/.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import type { Browser, Page } from 'playwright-core';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { launchBrowser, screenshot } from './harness/browser.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const SHOTS = 'console-backfills';
const BASE = 'appDDDDDDDDDDDDDD';
const PROJECTS = 600;
const TASKS = 30;

let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let syncDatabase: string;
let browser: Browser;
let page: Page;
let receiver: http.Server;
let hookUrl: string;
let hookId: string;
/** Every event the webhook's destination received, parsed. */
const received: Array<{ event: string; id: string; collection: string }> = [];

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, workerTickMs: 250, backfills: { chunkRows: 50, lookGapMs: 50 } },
      });
      account = await createAccount(svc, 'backfill-co');
      svc.airtable.base(BASE).generate({
        seed: 9,
        tables: [
          { name: 'Projects', records: PROJECTS },
          { name: 'Tasks', records: TASKS },
        ],
      });
      const sync = await createAirtableSync(svc, account, BASE);
      syncId = sync.id;
      syncDatabase = sync.adminUrl;

      receiver = http.createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          received.push(JSON.parse(body));
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/tasks`;
      const hook = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
        token: account.token,
        body: { url: hookUrl, topics: [`svc.${syncId}.tasks`] },
      });
      assert.is(hook.status, 201, hook.text);
      hookId = hook.body.id;

      browser = await launchBrowser();
      page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
      page.on('pageerror', (error) => process.stderr.write(`page error: ${error.message}\n`));
      await page.goto(`${svc.api}/`);
      await page.getByLabel('API token', { exact: true }).fill(account.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Syncs' }).waitFor();
    },
    () => svc,
  ),
);

test.after(async () => {
  await browser?.close();
  receiver?.close();
  await svc?.stop();
});

/**
 * Holds a lock on a table of the sync database that a backfill's chunk cannot share (as a
 * long transaction of someone else's would): the backfill stays running, reading nothing,
 * until release() ends the transaction.
 */
async function holdTable(table: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: syncDatabase });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${table} IN EXCLUSIVE MODE`);
  return {
    async release() {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

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

const backfillRow = (id: string) => page.locator(`tr[data-backfill="${id}"]`);

/** The id of the backfill the form's notice says it started. */
async function startedId(): Promise<string> {
  const text = (await page.locator('.notice-ok', { hasText: /^Backfill bf_\w+ started/ }).textContent()) ?? '';
  return /^Backfill (bf_\w+) started/.exec(text)![1]!;
}

async function apiBackfill(id: string) {
  return (await request(svc!.api, 'GET', `/api/syncs/${syncId}/backfills/${id}`, { token: account.token })).body;
}

test('the sync page has a Backfills tab: a labelled form, the collections with their rows', async () => {
  await page.evaluate((id) => (location.hash = `#/syncs/${id}`), syncId);
  await page.getByRole('link', { name: 'Backfills' }).click();
  await page.waitForURL(/\/backfills$/);
  await page.getByRole('heading', { name: 'Start a backfill' }).waitFor();
  assert.is(await page.getByRole('link', { name: 'Backfills' }).getAttribute('aria-current'), 'page');
  assert.ok(await page.getByLabel('Every collection (2)').isChecked());
  // The collections can be ticked only once "Only these" is chosen.
  assert.ok(await page.getByRole('checkbox', { name: /^projects/ }).isDisabled());
  await page.locator('label', { hasText: `tasks Tasks · ${TASKS} rows` }).waitFor();
  const targets = await page.getByLabel('Send the reads to').locator('option').allTextContents();
  assert.equal(targets, ['Every consumer of the topics (REST, Kafka, every webhook)', `Only the webhook to ${hookUrl}`]);
  await page.getByText('No backfills yet.').waitFor();
  await assertLabelled('backfills');
  await screenshot(page, SHOTS, '01-backfills-empty');
});

test('a backfill of every collection shows its progress while it runs, then "done"', async () => {
  // Held at first, so the page is seen with it running whatever the machine's speed.
  const lock = await holdTable('projects');
  let id = '';
  try {
    await page.getByRole('button', { name: 'Start backfill' }).click();
    id = await startedId();
    const row = backfillRow(id);
    await row.waitFor();
    assert.is(await row.getAttribute('data-state'), 'running');
    const label = `0 of about ${PROJECTS + TASKS} rows, reading projects (1 of 2 collections)`;
    await row.locator('.progress-label', { hasText: label }).waitFor();
    assert.is(await row.locator('progress').getAttribute('aria-label'), `Backfill ${id}: ${label}`);
    assert.ok(await row.getByRole('button', { name: `Cancel backfill ${id}` }).isVisible());
    assert.match((await row.textContent()) ?? '', /every consumer of the topics/);
    await screenshot(page, SHOTS, '02-backfill-running');
  } finally {
    await lock.release();
  }
  // The page follows it by itself (polling) until it is done.
  const row = backfillRow(id);
  await page.locator(`tr[data-backfill="${id}"][data-state="done"]`).waitFor({ timeout: 30_000 });
  assert.match((await row.locator('td[data-label="Progress"]').textContent()) ?? '', new RegExp(`^${PROJECTS + TASKS} rows$`));
  assert.is(await row.getByRole('button', { name: /Cancel/ }).count(), 0, 'nothing to cancel once done');
  const view = await apiBackfill(id);
  assert.equal([view.state, view.rows, view.collections], ['done', PROJECTS + TASKS, ['projects', 'tasks']]);
  // Without a webhook named, every consumer of the topics got the reads: the tasks webhook too.
  await waitFor('the tasks read at the webhook', async () => (received.filter((e) => e.event === 'read').length >= TASKS ? true : undefined), 30_000);
  assert.is(received.filter((e) => e.event === 'read' && e.collection === 'tasks').length, TASKS);
  received.length = 0;
  await screenshot(page, SHOTS, '03-backfill-done');
});

test('Cancel stops a running backfill of the collections chosen', async () => {
  const lock = await holdTable('projects');
  try {
    await page.getByLabel('Only these:').check();
    await page.getByRole('checkbox', { name: /^projects/ }).check();
    await page.getByRole('button', { name: 'Start backfill' }).click();
    await page.getByText(/^Backfill bf_\w+ started: projects\.$/).waitFor();
    const id = await startedId();
    const row = backfillRow(id);
    await row.getByRole('button', { name: `Cancel backfill ${id}` }).click();
    await page.locator(`tr[data-backfill="${id}"][data-state="canceled"]`).waitFor({ timeout: 10_000 });
    assert.equal([(await apiBackfill(id)).state, (await apiBackfill(id)).rows], ['canceled', 0]);
    await screenshot(page, SHOTS, '04-backfill-canceled');
  } finally {
    await lock.release();
  }
});

test("the API's refusal is shown at the field: a collection the webhook does not take", async () => {
  await page.getByRole('checkbox', { name: /^projects/ }).uncheck();
  await page.getByRole('button', { name: 'Start backfill' }).click();
  await page.getByText('Tick at least one collection, or choose every collection.').waitFor();

  await page.getByRole('checkbox', { name: /^projects/ }).check();
  await page.getByLabel('Send the reads to').selectOption(hookId);
  await page.getByRole('button', { name: 'Start backfill' }).click();
  const message = 'collections: the webhook does not take projects (not among its topics)';
  await page.locator('#collections-error', { hasText: message }).waitFor();
  await page
    .getByRole('alert')
    .filter({ hasText: `Not started: ${message}` })
    .waitFor();
  await screenshot(page, SHOTS, '05-backfill-refused');
  const listed = await request(svc!.api, 'GET', `/api/syncs/${syncId}/backfills`, { token: account.token });
  assert.is(listed.body.data.length, 2, 'nothing was started');
});

test('Webhooks tab: "Backfill this webhook" sends every row of its topics to it alone', async () => {
  await page.getByRole('link', { name: 'Webhooks' }).click();
  const card = page.locator('article.webhook', { hasText: hookUrl });
  await card.getByRole('button', { name: 'Backfill this webhook' }).click();
  await card.getByText(/^Backfill bf_\w+ started: the current rows of this webhook’s topics are sent to it alone\./).waitFor();
  const id = /Backfill (bf_\w+) started/.exec((await card.locator('.backfill-note').textContent()) ?? '')![1]!;
  await screenshot(page, SHOTS, '06-webhook-backfill');
  await waitFor('every task read delivered', async () => (received.filter((e) => e.event === 'read').length >= TASKS ? true : undefined), 30_000);
  const reads = received.filter((e) => e.event === 'read');
  assert.is(reads.length, TASKS, 'one read per task');
  assert.is(new Set(reads.map((e) => e.id)).size, TASKS);
  assert.ok(
    reads.every((e) => e.collection === 'tasks'),
    'only the webhook’s topic',
  );

  await card.getByRole('link', { name: 'Follow it on the Backfills tab' }).click();
  const row = backfillRow(id);
  await page.locator(`tr[data-backfill="${id}"][data-state="done"]`).waitFor({ timeout: 30_000 });
  assert.match((await row.locator('td[data-label="Sent to"]').textContent()) ?? '', new RegExp(`webhook ${hookUrl}`));
  assert.match((await row.locator('td[data-label="Progress"]').textContent()) ?? '', new RegExp(`^${TASKS} rows$`));
});

test('readable on a phone: the list becomes cards, nothing scrolls sideways', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await page.reload();
    await page.locator('tr[data-backfill]').first().waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
    await screenshot(page, SHOTS, '07-phone-backfills');
  } finally {
    await page.setViewportSize({ width: 1280, height: 860 });
  }
});

test.run();
