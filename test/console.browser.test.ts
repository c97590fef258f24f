/**
 * The console in a real browser (the headless Chromium of @sparticuz/chromium, driven by
 * playwright-core) against the whole service and the fake Airtable: sign in, create an
 * account, connect a sync, watch it reach "normal", copy the psql command and run it, change
 * a setting and see it take effect, add a webhook and see a delivery, delete, sign out.
 * Then every page of a Stripe sync of an account with customers (the fake Stripe: 100+
 * tables), on a laptop and a phone, with no JS error in the page.
 * Screenshots of every page go to test-artifacts/console/.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import type { FakeStripeAccount } from '../fakes/stripe/index.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { launchBrowser, screenshot } from './harness/browser.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const run = promisify(execFile);
const SHOTS = 'console';

let svc: TestService;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: FakeBase;
let other: TestAccount;
let otherSync: string;
let acmeToken: string;
let acmeEventsPassword: string;
let syncId: string;
let readerUrl: string;
const received: Array<{ status: number; body: string }> = [];
/** A second destination that answers 503 until a test switches it to 204. */
const down: Array<{ status: number; body: string }> = [];
let downAnswers = 503;
let receiver: http.Server;
let receiverUrl: string;
/** What the Stripe sync's webhook destination received. */
const stripeHooks: Array<{ status: number; body: string }> = [];
/** The Stripe sync of an account with customers whose pages the Stripe tests visit. */
let stripeSync: string;
let stripeReader: string;
let stripeClient: Stripe;
let stripeCustomers: number;
let stripeUpstream: FakeStripeAccount;
/** JS errors and console errors of the page since the last takePageProblems(). */
const pageProblems: string[] = [];

test.before(async () => {
  try {
    svc = await startTestService({
      config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
      tunables: {
        // Never paced: these pages show rebuilds at once; a paced cycle could hold one back up to 60 s.
        airtable: { pollIntervalMs: 250, cycleGapMs: 250, pacedCycleMs: 0 },
        workerTickMs: 250,
        decoder: { lagReportMs: 300 },
        webhooks: { schedule: { initialDelayMs: 200, maxDelayMs: 400, maxAttempts: 4 } },
        // Audit rounds close together, at a share that keeps them short: the Overview shows their drift.
        stripe: { audit: { everyMs: 2000, settleMs: 500, sharePerSecond: 10 } },
      },
    });
    base = svc.airtable.createBase({ name: 'Launch Plan' });
    const clients = base.createTable('Clients', [{ name: 'Name', type: 'singleLineText' }]);
    base.createTable('Tasks', [
      { name: 'Name', type: 'singleLineText' },
      { name: 'Points', type: 'number', options: { precision: 0 } },
    ]);
    const link = base.addField('Tasks', { name: 'Client', type: 'multipleRecordLinks', options: { linkedTableId: clients.id, prefersSingleRecordLink: true } });
    base.addField('Tasks', {
      name: 'Client name',
      type: 'multipleLookupValues',
      options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: clients.primaryFieldId },
    });
    const [acme] = base.createRecords('Clients', [{ Name: 'Acme Corp' }]);
    base.createRecords('Tasks', [
      { Name: 'Plan', Points: 1, Client: [acme!.id] },
      { Name: 'Build', Points: 3, Client: [acme!.id] },
      { Name: 'Ship', Points: 5 },
    ]);

    // Another tenant with a sync of its own: nothing of it may show up for acme.
    other = await createAccount(svc, 'globex');
    const created = await request(svc.api, 'POST', '/api/syncs', {
      token: other.token,
      body: { kind: 'airtable', base_id: 'appBBBBBBBBBBBBBB', api_key: AIRTABLE_TEST_TOKEN },
    });
    assert.is(created.status, 201, created.text);
    otherSync = created.body.id;

    // The webhook destination: fails the first attempt, so the delivery log has a row to show.
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        if (req.url === '/hooks/stripe') {
          stripeHooks.push({ status: 204, body });
          res.writeHead(204).end();
          return;
        }
        if (req.url === '/hooks/down') {
          const status = downAnswers;
          down.push({ status, body });
          res.writeHead(status).end();
          return;
        }
        const status = received.length === 0 ? 500 : 204;
        received.push({ status, body });
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/tributary`;

    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: svc.api });
    page = await context.newPage();
    page.on('pageerror', (error) => process.stderr.write(`page error: ${error.message}\n`));
    page.on('pageerror', (error) => pageProblems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') pageProblems.push(`console error: ${message.text()} (${message.location().url})`);
    });
  } catch (error) {
    process.stderr.write(`set-up failed: ${String(error)}\n${svc?.logs.lines.slice(-20).join('\n') ?? ''}\n`);
    throw error;
  }
});

test.after(async () => {
  await browser?.close();
  receiver?.close();
  await svc?.stop();
});

/** Every form control on the page has a label (or an aria-label); every button has a name. */
async function assertLabelled(where: string): Promise<void> {
  const unlabelled = await page.evaluate(() => {
    const out: string[] = [];
    for (const el of document.querySelectorAll('input, select, textarea')) {
      const control = el as HTMLInputElement;
      if (control.type === 'hidden' || control.closest('[hidden]') || control.getAttribute('aria-hidden') === 'true') continue;
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

async function go(hash: string): Promise<void> {
  await page.evaluate((h) => (location.hash = h), hash);
}

/** From navigation start to the console's first rendered view (a mark app.js sets), in ms. */
const firstRender = () => page.evaluate(() => performance.getEntriesByName('console-first-render')[0]?.startTime ?? Infinity);

/**
 * The page's JS errors and console errors since the last call (and forgets them). `expected`:
 * patterns of errors the test caused on purpose (e.g. the browser's line for a 400 answer);
 * each pattern excuses one error.
 */
function takePageProblems(expected: RegExp[] = []): string[] {
  const left = pageProblems.splice(0);
  for (const pattern of expected) {
    const i = left.findIndex((p) => pattern.test(p));
    if (i >= 0) left.splice(i, 1);
  }
  return left;
}

/**
 * What sticks out sideways on the current page: the page itself scrolling sideways, anything in
 * <main> reaching past the viewport's right edge, and scroll boxes (table wrappers) that scroll
 * sideways (code snippets in <pre> may: they are meant to).
 */
async function sidewaysOverflow(): Promise<string[]> {
  return page.evaluate(() => {
    // (No named functions in here: tsx would wrap them in a helper the page does not have.)
    const out: string[] = [];
    const page = document.documentElement.scrollWidth - window.innerWidth;
    if (page > 0) out.push(`the page scrolls sideways by ${page}px`);
    for (const el of document.querySelectorAll('main *')) {
      if (el.closest('pre, .sr-only')) continue;
      const rect = el.getBoundingClientRect();
      if (rect.width <= 1) continue;
      const what = `${el.tagName.toLowerCase()}${typeof el.className === 'string' && el.className.trim() ? `.${el.className.trim().split(/\s+/).join('.')}` : ''} “${(el.textContent ?? '').trim().slice(0, 60)}”`;
      if (rect.right > window.innerWidth + 0.5) out.push(`${what} reaches ${Math.round(rect.right - window.innerWidth)}px past the right edge`);
      const style = getComputedStyle(el);
      if (/auto|scroll/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
        out.push(`${what} scrolls sideways by ${el.scrollWidth - el.clientWidth}px`);
    }
    return out.slice(0, 8);
  });
}

/** Identifiers (table names, topics) as the page shows them: a line may end only after “_” or “.”, never mid-word. */
const IDENTIFIERS = 'table.tables tbody th code, table.tables tbody td, ul.topics code, .topic-list code, article.webhook p code';

/**
 * Where the page breaks a name (of the elements matching `selector`) in the middle of a word:
 * “billing_portal_configuratio|n”. A break after “_”, “.”, “-”, “/” or a space is fine.
 */
async function namesBrokenMidWord(selector = IDENTIFIERS): Promise<string[]> {
  return page.evaluate((selector) => {
    // (No named functions in here: tsx would wrap them in a helper the page does not have.)
    const out: string[] = [];
    const range = document.createRange();
    for (const el of document.querySelectorAll(selector)) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      let lastTop: number | null = null;
      let lastChar = '';
      for (let node = walker.nextNode() as Text | null; node; node = walker.nextNode() as Text | null) {
        for (let i = 0; i < node.data.length; i++) {
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const rect = range.getClientRects()[0];
          if (!rect) continue;
          if (lastTop !== null && rect.top > lastTop + 2 && !/[_.\s/-]/.test(lastChar))
            out.push(`${(el.textContent ?? '').trim()} (…${lastChar}|${node.data[i]}…)`);
          lastTop = rect.top;
          lastChar = node.data[i]!;
        }
      }
    }
    return out.slice(0, 8);
  }, selector);
}

/** How far down the page (in viewport heights) the Overview's “Recent errors” heading is. */
async function recentErrorsDown(): Promise<number> {
  return page.getByRole('heading', { name: 'Recent errors' }).evaluate((el) => (el.getBoundingClientRect().top + window.scrollY) / window.innerHeight);
}

test('the page renders its first view on every load, fresh or reloaded', async () => {
  // Its speed is bench/console.ts's business; here: the mark app.js sets once a view is on
  // the page comes on the first load of a just-launched browser and on every reload.
  await page.goto(`${svc.api}/`);
  await page.getByLabel('API token', { exact: true }).waitFor();
  const marks = [await firstRender()];
  for (let i = 0; i < 2; i++) {
    await page.reload();
    await page.getByLabel('API token', { exact: true }).waitFor();
    marks.push(await firstRender());
  }
  for (const ms of marks) assert.ok(Number.isFinite(ms) && ms > 0, `first-render mark: ${marks.join(', ')}`);
});

test('the operator signs in with the keyboard and creates an account (token shown once)', async () => {
  await page.goto(`${svc.api}/`);
  await page.getByLabel('API token', { exact: true }).waitFor();
  await screenshot(page, SHOTS, '01-sign-in');
  await assertLabelled('sign-in');

  // A wrong token: a message at the field, no blank page.
  await page.keyboard.type('trb_wrong');
  await page.keyboard.press('Enter');
  await page.getByText('that token is not valid').waitFor();
  await screenshot(page, SHOTS, '02-sign-in-error');

  // The token field has focus: type the operator token and press Enter.
  await page.getByLabel('API token', { exact: true }).fill('');
  await page.getByLabel('API token', { exact: true }).focus();
  await page.keyboard.type(svc.adminToken);
  await page.keyboard.press('Enter');
  await page.getByText('operator (all accounts)').waitFor();

  await page.getByRole('link', { name: 'Accounts' }).click();
  await page.getByRole('heading', { name: 'Accounts' }).waitFor();
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByText('Give the account a name.').waitFor();
  await page.getByLabel('Name').fill('acme');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByText('Account acme created.').waitFor();
  const codes = await page.locator('.notice-ok code').allTextContents();
  acmeToken = codes.find((c) => c.startsWith('trb_'))!;
  acmeEventsPassword = codes[2]!;
  assert.ok(acmeToken, 'the new token is shown');
  await screenshot(page, SHOTS, '03-accounts');
  await assertLabelled('accounts');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API token', { exact: true }).waitFor();
});

test('the account signs in; the session cookie is HttpOnly and SameSite=Strict', async () => {
  await page.getByLabel('API token', { exact: true }).fill(acmeToken);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Syncs' }).waitFor();
  await page.getByText('No syncs yet.').waitFor();
  const cookies = await context.cookies(svc.api);
  const session = cookies.find((c) => c.name === 'tributary_session');
  assert.ok(session, JSON.stringify(cookies));
  assert.is(session!.httpOnly, true);
  assert.is(session!.sameSite, 'Strict');
  assert.is(session!.path, '/');
  assert.not.ok(await page.evaluate(() => document.cookie.includes('tributary_session')), 'scripts cannot read it');
  await screenshot(page, SHOTS, '04-syncs-empty');
});

test('the connect form rejects bad input with messages, and shows the upstream check’s refusal', async () => {
  await page.getByRole('link', { name: 'Connect a sync' }).first().click();
  await page.getByRole('heading', { name: 'Connect a sync' }).waitFor();
  await assertLabelled('connect');
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.getByText('A base ID is app followed by 14 letters or digits').waitFor();
  await page.getByText('Paste a personal access token.').waitFor();
  assert.is(await page.getByLabel('Base ID').getAttribute('aria-invalid'), 'true');

  await page.getByLabel('Base ID').fill(base.id);
  await page.getByLabel('Personal access token').fill('patNOTAREALTOKEN1.abcdef');
  // The optional own server: a URL that is not PostgreSQL's is refused at its field.
  await page.getByText('Use your own PostgreSQL server (optional)').click();
  await page.getByLabel('Database server URL').fill('mysql://db.example.com/app');
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.getByText('The URL must start with postgres:// or postgresql://.').waitFor();
  assert.is(await page.getByLabel('Database server URL').getAttribute('aria-invalid'), 'true');
  await page.getByLabel('Database server URL').fill('');
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.getByText(/Airtable key was rejected/).waitFor();
  await screenshot(page, SHOTS, '05-connect-refused');

  // Stripe: the permission table of a restricted key is shown; a publishable key is refused here.
  await page.getByLabel('Stripe account').check();
  await page.getByRole('table', { name: 'Permissions of a restricted key' }).waitFor();
  assert.ok(await page.getByRole('row', { name: 'webhook resources Write' }).isVisible());
  await page.getByLabel('API key').fill('pk_test_123');
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.getByText(/publishable pk_ keys cannot read/).waitFor();
  await screenshot(page, SHOTS, '06-connect-stripe');
  await page.getByLabel('Airtable base').check();
});

test('connecting an Airtable sync: the list shows it until it reaches "normal"', async () => {
  await page.getByLabel('Base ID').fill(base.id);
  await page.getByLabel('Personal access token').fill(AIRTABLE_TEST_TOKEN);
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.waitForURL(/#\/syncs\/syn_/);
  syncId = /#\/syncs\/(syn_[a-z0-9]+)/.exec(page.url())![1]!;
  await page.getByRole('heading', { name: /Launch Plan/ }).waitFor();

  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Syncs' }).click();
  const row = page.locator(`tr[data-sync="${syncId}"]`);
  await row.waitFor();
  await row.locator('[data-indicator="normal"]').waitFor({ timeout: 30_000 });
  await row.getByText(/ago|just now/).waitFor({ timeout: 30_000 });
  assert.match((await row.textContent()) ?? '', /Launch Plan/);
  assert.is(await row.locator('.indicator').getAttribute('title'), 'syncing as usual', 'the rule’s reason on hover');
  assert.not.ok(await page.getByText(other.id).count(), 'no other account’s sync');
  assert.is(await page.locator('tr[data-sync]').count(), 1);
  await screenshot(page, SHOTS, '07-syncs');
});

test('a Stripe account with customers is connected (by the API): its backfill runs while the Airtable pages are visited', async () => {
  const stripe = svc.stripe!;
  const account = stripe.createAccount();
  stripeUpstream = account;
  const key = 'sk_test_consolePages000000000';
  stripe.addKey(key, { account: account.id });
  const summary = account.generate({ seed: 11, customers: 30 });
  stripeCustomers = summary.customers!;
  const created = await request(svc.api, 'POST', '/api/syncs', { token: acmeToken, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  stripeSync = created.body.id;
  stripeReader = created.body.database.url;
  const url = new URL(stripe.url);
  stripeClient = new Stripe(key, {
    host: url.hostname,
    port: Number(url.port),
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 2,
  });
});

test('a first sweep shows a progress bar in the list, live, until it completes', async () => {
  const big = svc.airtable.createBase({ name: 'Big Base' });
  big.generate({
    seed: 7,
    tables: [
      { name: 'Orders', records: 600 },
      { name: 'Items', records: 600 },
    ],
  });
  const bigToken = 'patBIGBASEBIGBASE.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
  svc.airtable.addToken(bigToken, { bases: '*' });
  const created = await request(svc.api, 'POST', '/api/syncs', { token: acmeToken, body: { kind: 'airtable', base_id: big.id, api_key: bigToken } });
  assert.is(created.status, 201, created.text);
  const row = page.locator(`tr[data-sync="${created.body.id}"]`);
  await row.waitFor();
  const bar = row.locator('progress');
  await bar.waitFor({ timeout: 20_000 });
  assert.match((await row.locator('.progress-label').textContent()) ?? '', /^First sweep: table \w+ \(\d of 2\), [\d,]+ records$/);
  await screenshot(page, SHOTS, '07b-syncs-first-sweep');
  await bar.waitFor({ state: 'detached', timeout: 60_000 });
  await row.locator('[data-indicator="normal"]').waitFor();

  // A sync in trouble says why in the row, for eyes and keyboards, not only on hover.
  svc.airtable.revokeToken(bigToken);
  const red = row.locator('[data-indicator="red"]');
  await red.waitFor({ timeout: 30_000 });
  const reason = await red.getAttribute('title');
  assert.ok(reason && reason.length > 0, 'a reason');
  assert.ok(await red.locator('.reason', { hasText: reason! }).isVisible(), `the reason “${reason}” is shown in the row`);
  await screenshot(page, SHOTS, '07c-syncs-red');
  await request(svc.api, 'DELETE', `/api/syncs/${created.body.id}`, { token: acmeToken });
});

test('Overview: _sync_meta times, tables with upstream names and row counts, the chart', async () => {
  await go(`#/syncs/${syncId}/overview`);
  await page.getByRole('cell', { name: 'Tasks', exact: true }).waitFor();
  const tasks = page.locator('tr', { has: page.locator('code', { hasText: /^tasks$/ }) });
  assert.match((await tasks.textContent()) ?? '', /Tasks\s*3/);
  await page.getByText('Last cycle completed (_sync_meta.completed_at)').waitFor();
  await page.locator('svg.chart polyline, svg.chart circle').first().waitFor({ timeout: 15_000 });
  assert.match((await page.locator('svg.chart').getAttribute('aria-label')) ?? '', /latest lag/);
  // A sync minutes old opens on the last hour, not six, where its history would be a speck.
  assert.is(await page.getByRole('combobox', { name: 'Show' }).inputValue(), '1');
  assert.match((await page.locator('svg.chart').getAttribute('aria-label')) ?? '', /over the last hour/);
  await page.getByText('No errors in the last day.').waitFor();
  await screenshot(page, SHOTS, '08-overview');
  await assertLabelled('overview');
});

test('Overview: the chart leaves room for long labels ("1 min 40 s")', async () => {
  // A cycle of the history with a lag past a minute, as a slow cycle leaves.
  await query(svc.controlUrl, "INSERT INTO sync_cycles (sync_id, at, cycles, lag_s, duration_s) VALUES ($1, now() - interval '5 minutes', 1, 95, 20)", [
    syncId,
  ]);
  await go(`#/syncs/${syncId}/overview`);
  await page.locator('svg.chart polyline, svg.chart circle').first().waitFor({ timeout: 15_000 });
  await page.locator('svg.chart .grid text', { hasText: '1 min 40 s' }).waitFor();
  const clipped = await page
    .locator('svg.chart .grid text')
    .evaluateAll((texts) => texts.filter((t) => (t as SVGTextElement).getBBox().x < 0).map((t) => t.textContent));
  assert.equal(clipped, [], 'labels that start left of the chart');
});

test('Connect: copy the psql command and run it; the event password on request', async () => {
  await page.getByRole('link', { name: 'Connect', exact: true }).click();
  await page.getByRole('button', { name: 'Copy psql command' }).waitFor();
  const sync = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: acmeToken });
  readerUrl = sync.body.database.url;
  const password = new URL(readerUrl).password;
  assert.not.ok((await page.locator('main').textContent())!.includes(password), 'the password is hidden until asked for');
  assert.match((await page.locator('#database-url').textContent()) ?? '', /^postgres:\/\/tr_\w+_ro:••••••••@/);

  await page.getByRole('button', { name: 'Copy psql command' }).click();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.ok(copied.startsWith('psql '), copied);
  assert.ok(copied.includes(password), 'the copy has the real password');
  const { stdout } = await run('/bin/sh', ['-c', `${copied} -At -c 'select count(*) from tasks'`]);
  assert.is(stdout.trim(), '3');

  await page.getByRole('button', { name: 'Show password' }).click();
  assert.ok((await page.locator('#psql-command').textContent())!.includes(password));
  await page.getByRole('button', { name: 'Show event password' }).click();
  await page.locator('#events-password', { hasText: acmeEventsPassword }).waitFor();
  await page.getByText(`${svc.api}/api/wait/${syncId}`).first().waitFor();
  assert.ok(await page.getByText(`svc.${syncId}.tasks`).first().isVisible());
  await screenshot(page, SHOTS, '09-connect');
  await assertLabelled('connect tab');
});

test('Connect, a base in the first sync’s database (operator-made): the psql command opens its schema', async () => {
  const notes = svc.airtable.createBase({ name: 'Notes' });
  notes.createTable('Notes', [{ name: 'Title', type: 'singleLineText' }]);
  notes.createRecords('Notes', [{ Title: 'one' }, { Title: 'two' }]);
  const first = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: acmeToken });
  const made = await request(svc.api, 'POST', '/api/syncs', {
    token: svc.adminToken,
    body: { kind: 'airtable', base_id: notes.id, api_key: AIRTABLE_TEST_TOKEN, account_id: first.body.account_id, database_of: syncId, schema: 'notes_base' },
  });
  assert.is(made.status, 201, made.text);
  const shared = made.body.id as string;
  await waitFor('the shared sync normal', async () =>
    (await request(svc.api, 'GET', `/api/syncs/${shared}`, { token: acmeToken })).body.status?.completed_at ? true : undefined,
  );
  await go(`#/syncs/${shared}/connect`);
  await page.getByRole('button', { name: 'Copy psql command' }).waitFor();
  const text = (await page.locator('main').textContent()) ?? '';
  assert.ok(text.includes(`shared with sync ${syncId}`), 'the page says whose database it is');
  assert.ok(text.includes('SET search_path TO notes_base'), text);
  await page.getByRole('button', { name: 'Copy psql command' }).click();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  // The first sync's reader, starting in this sync's schema: its tables by their bare names.
  const { stdout } = await run('/bin/sh', ['-c', `${copied} -At -c 'select count(*) from notes'`]);
  assert.is(stdout.trim(), '2');
  assert.ok(await page.getByText(`svc.${shared}.notes`).first().isVisible(), 'its topics carry its own id');
  await screenshot(page, SHOTS, '09b-connect-shared');
  await assertLabelled('connect tab, shared database');
  // Left as it was for the tests that follow: the shared sync goes.
  assert.is((await request(svc.api, 'DELETE', `/api/syncs/${shared}`, { token: acmeToken })).status, 200);
  await go(`#/syncs/${syncId}/connect`);
  await page.getByRole('button', { name: 'Copy psql command' }).waitFor();
});

test('Settings: bad input is refused with a message; Lookup as text and stable attachment links take effect', async () => {
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByLabel('Debounce Updates (ms)').waitFor();
  await assertLabelled('settings');
  assert.match((await page.locator('main').textContent()) ?? '', /66% more/);
  await page.getByLabel('Debounce Updates (ms)').fill('-5');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText(/Enter a whole number of milliseconds/).waitFor();
  await screenshot(page, SHOTS, '10-settings-error');

  const before = await query<{ data_type: string }>(
    readerUrl,
    "SELECT data_type FROM information_schema.columns WHERE table_name = 'tasks' AND column_name = 'client_name'",
  );
  assert.equal(before, [{ data_type: 'ARRAY' }]);
  await page.getByLabel('Debounce Updates (ms)').fill('0');
  await page.getByLabel('Lookup as').selectOption('text');
  const links = page.getByLabel('Stable attachment links');
  assert.is(await links.isChecked(), false, 'off by default');
  assert.match((await page.locator('#setting-stable_attachment_links-hint').textContent()) ?? '', /anyone who has a link/);
  await links.check();
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText(/^Saved\. The next sync cycle rebuilds/).waitFor();
  await screenshot(page, SHOTS, '11-settings-saved');
  await waitFor(
    'the lookup column to become text',
    async () => {
      const rows = await query<{ data_type: string }>(
        readerUrl,
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'tasks' AND column_name = 'client_name'",
      );
      return rows[0]?.data_type === 'text' ? rows : undefined;
    },
    30_000,
  );
  const saved = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: acmeToken });
  assert.is(saved.body.settings.lookup_as, 'text');
  assert.is(saved.body.settings.stable_attachment_links, true);
});

test('a sign-in in another tab leaves this one working: its stale CSRF token is renewed', async () => {
  // Another tab of the same browser signs in again: new session, new cookie, new CSRF token.
  const status = await page.evaluate(
    async (token) =>
      (await fetch('/console/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) })).status,
    acmeToken,
  );
  assert.is(status, 200);
  await page.getByLabel('Debounce Updates (ms)').fill('150');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText(/^Saved/).waitFor();
  assert.is((await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: acmeToken })).body.settings.debounce_ms, 150);
  await page.getByLabel('Debounce Updates (ms)').fill('0');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await waitFor(
    'debounce back to 0',
    async () => ((await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: acmeToken })).body.settings.debounce_ms === 0 ? true : undefined),
    10_000,
  );
});

test('Webhooks: add one (secret shown once), see a delivery and its log', async () => {
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByLabel('Destination URL').waitFor();
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.getByText('Choose at least one topic.').waitFor();
  await page.getByText('Enter an absolute http:// or https:// URL.').waitFor();

  await page.getByLabel('Destination URL').fill(receiverUrl);
  await page.getByLabel(`svc.${syncId}.tasks`).check();
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.getByText('Its signing secret is shown only this once').waitFor();
  assert.match((await page.locator('.notice-ok code').textContent()) ?? '', /^whsec_/);
  await screenshot(page, SHOTS, '12-webhook-added');

  const task = base.records('Tasks').find((r) => r.fields.Name === 'Ship')!;
  base.updateRecord('Tasks', task.id, { Points: 8 });
  await waitFor('the delivery', async () => received.find((r) => r.status === 204 && r.body.includes('"points":8')), 30_000);
  await page.locator('.delivered-count', { hasText: /^1 delivered/ }).waitFor({ timeout: 15_000 });
  await page.getByRole('button', { name: 'Show delivery log' }).click();
  const entry = page.locator('table.deliveries tbody tr').first();
  await entry.waitFor();
  assert.match((await entry.textContent()) ?? '', /delivered/);
  assert.match((await entry.textContent()) ?? '', new RegExp(task.id));
  await screenshot(page, SHOTS, '13-webhooks');
  await assertLabelled('webhooks');
});

test('Webhooks: deliveries that ran out of attempts are replayed from the page', async () => {
  const downUrl = receiverUrl.replace('/hooks/tributary', '/hooks/down');
  await page.getByLabel('Destination URL').fill(downUrl);
  await page.getByLabel(`svc.${syncId}.clients`).check();
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.getByText('Its signing secret is shown only this once').waitFor();
  const card = page.locator('article.webhook', { hasText: downUrl });
  await card.waitFor();

  const client = base.records('Clients')[0]!;
  base.updateRecord('Clients', client.id, { Name: 'Acme Industries' });
  // Four attempts (the test schedule), all refused: the page offers the replay.
  const replay = card.getByRole('button', { name: 'Replay 1 exhausted' });
  await replay.waitFor({ timeout: 30_000 });
  assert.is(down.length, 4, 'every attempt reached the destination');
  await card.getByRole('button', { name: 'Show delivery log' }).click();
  const entry = card.locator('table.deliveries tbody tr').first();
  await entry.waitFor();
  assert.match((await entry.textContent()) ?? '', /exhausted/);
  assert.match((await entry.textContent()) ?? '', /HTTP 503/);
  await screenshot(page, SHOTS, '13b-webhook-exhausted');

  downAnswers = 204;
  await replay.click();
  await page.getByText('1 delivery queued again').waitFor();
  await card.locator('.delivered-count', { hasText: /^1 delivered/ }).waitFor({ timeout: 15_000 });
  assert.is(down.at(-1)!.status, 204);
  assert.match(down.at(-1)!.body, /Acme Industries/);
  await card.getByRole('button', { name: 'Replay 1 exhausted' }).waitFor({ state: 'detached' });
});

test("no page shows another account's data", async () => {
  await go(`#/syncs/${otherSync}`);
  await page.getByRole('heading', { name: 'Sync not found' }).waitFor();
  assert.not.ok(((await page.locator('main').textContent()) ?? '').includes(other.eventsUsername));
  const answers = await page.evaluate(async (id) => {
    const out: number[] = [];
    for (const path of [`/api/syncs/${id}`, `/api/syncs/${id}/tables`, `/api/syncs/${id}/connection`, `/api/syncs/${id}/webhooks`]) {
      out.push((await fetch(path)).status);
    }
    return out;
  }, otherSync);
  assert.equal(answers, [404, 404, 404, 404]);
  // The session's own account only: the same cookie from the same page cannot act on the other.
  const patch = await page.evaluate(
    async (id) =>
      (await fetch(`/api/syncs/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"settings":{"turbo":true}}' })).status,
    syncId,
  );
  assert.is(patch, 403, 'no CSRF token, no change');
  await screenshot(page, SHOTS, '14-not-found');
});

test('readable on a phone: no sideways scrolling, tables become cards', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [hash, name] of [
    ['#/', '15-phone-syncs'],
    [`#/syncs/${syncId}/overview`, '16-phone-overview'],
    [`#/syncs/${syncId}/connect`, '17-phone-connect'],
    [`#/syncs/${syncId}/settings`, '17c-phone-settings'],
    [`#/syncs/${syncId}/webhooks`, '17d-phone-webhooks'],
    [`#/syncs/${syncId}/delete`, '17e-phone-delete'],
    ['#/connect', '17f-phone-connect-form'],
  ] as const) {
    await go(hash);
    await page.locator('main h1').first().waitFor();
    await page.waitForTimeout(300);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${hash} scrolls sideways by ${overflow}px`);
    await screenshot(page, SHOTS, name);
  }
  await page.setViewportSize({ width: 1280, height: 860 });
});

/** A row of the Overview's table list, by the table's name. */
const tableRow = (name: string) => page.locator('table.tables tbody tr', { has: page.locator('th code', { hasText: new RegExp(`^${name}$`) }) });

test('Stripe, the syncs list: the account’s sync is listed, and "normal" once its backfill is done', async () => {
  takePageProblems();
  const waited = await request(svc.api, 'GET', `/api/wait/${stripeSync}?timeout=120000`, { token: acmeToken });
  assert.is(waited.body.ok, true, waited.text);
  const customers = await query<{ n: string }>(stripeReader, 'SELECT count(*) AS n FROM customer');
  assert.is(Number(customers[0]!.n), stripeCustomers, 'every customer is in the database');
  await go('#/');
  const row = page.locator(`tr[data-sync="${stripeSync}"]`);
  await row.locator('[data-indicator="normal"]').waitFor({ timeout: 20_000 });
  await row.getByText(/ago|just now/).waitFor({ timeout: 20_000 });
  assert.match((await row.textContent()) ?? '', /Stripe/);
  assert.equal(await sidewaysOverflow(), []);
  await screenshot(page, SHOTS, '30-stripe-syncs');
  assert.equal(takePageProblems(), []);
});

test('Stripe, Overview: _sync_meta times, 100+ tables with their object types and row counts, the chart', async () => {
  // Long tasks (main thread busy for 50 ms or more) from here on: a slow rendering of 100+ rows shows up.
  await page.evaluate(() => {
    const w = window as unknown as { longTasks: number[] };
    w.longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) w.longTasks.push(Math.round(e.duration));
    }).observe({ type: 'longtask' });
  });
  const started = Date.now();
  await go(`#/syncs/${stripeSync}/overview`);
  await tableRow('customer').waitFor();
  const rendered = Date.now() - started;
  const rows = page.locator('table.tables tbody tr');
  const tables = await query<{ n: string }>(stripeReader, "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public' AND tablename <> '_sync_meta'");
  assert.ok(Number(tables[0]!.n) >= 100, `${tables[0]!.n} tables`);
  assert.is(await rows.count(), Number(tables[0]!.n), 'every table of the database is listed');
  // Those with rows first, shown; the empty ones folded away under one line that counts them.
  const folded = page.locator('details.empty-tables');
  assert.is(await folded.getAttribute('open'), null, 'the empty tables start folded');
  const emptyRows = folded.locator('tbody tr');
  const emptyCount = await emptyRows.count();
  assert.ok(emptyCount > 50, `${emptyCount} empty tables folded`);
  assert.match((await folded.locator('summary').textContent()) ?? '', new RegExp(`^${emptyCount} empty tables`));
  for (const cell of await folded.locator('td[data-label="Rows"]').allTextContents()) assert.is(cell.trim(), '0');
  assert.ok(await tableRow('customer').isVisible(), 'a table with rows is shown');
  await folded.locator('summary').click();
  assert.ok(await emptyRows.first().isVisible(), 'unfolded on a click');
  assert.ok(rendered < 5_000, `the Overview took ${rendered} ms to show its tables`);

  // Upstream names are Stripe's object types; row counts are the database's.
  for (const [name, object] of [
    ['customer', 'customer'],
    ['invoice', 'invoice'],
    ['subscription', 'subscription'],
    ['price', 'price'],
    ['billing_credit_balance_transaction', 'billing.credit_balance_transaction'],
    ['upcoming_customer_invoice', 'upcoming invoice (customer)'],
  ] as const) {
    const row = tableRow(name);
    assert.is((await row.locator('td[data-label="Upstream name"]').textContent())?.trim(), object, name);
    const [{ n }] = (await query<{ n: string }>(stripeReader, `SELECT count(*) AS n FROM ${name}`)) as [{ n: string }];
    if (['customer', 'invoice', 'subscription'].includes(name)) assert.ok(Number(n) > 0, `${name} has rows`);
    assert.is((await row.locator('td[data-label="Rows"]').textContent())?.trim(), Number(n).toLocaleString('en-US'), `${name}: the database has ${n}`);
    assert.is((await row.locator('td[data-label="Event topic"]').textContent())?.trim(), `svc.${stripeSync}.${name.startsWith('upcoming_') ? name : object}`);
  }

  // _sync_meta's times, as the sync's database has them (the events feed is read every 500 ms: the
  // page's are from a moment ago).
  const completed = await page
    .locator('dt', { hasText: 'Last cycle completed (_sync_meta.completed_at)' })
    .locator('xpath=following-sibling::dd[1]//time')
    .getAttribute('datetime');
  const [meta] = await query<{ started_at: Date; completed_at: Date }>(stripeReader, 'SELECT started_at, completed_at FROM _sync_meta');
  assert.ok(
    completed && Date.parse(completed) <= meta!.completed_at.getTime() && Date.parse(completed) > started - 60_000,
    `${completed} vs ${meta!.completed_at.toISOString()}`,
  );
  // A feed read every 500 ms: either a cycle runs (its start newer than the last completion) or none does.
  await page.getByText(/^(This|Last) cycle started \(_sync_meta\.started_at\)$/).waitFor();
  await page.getByText('Duration of the last completed cycle (_sync_meta.duration_last)').waitFor();
  await page.locator('svg.chart polyline, svg.chart circle').first().waitFor({ timeout: 15_000 });
  assert.match((await page.locator('svg.chart').getAttribute('aria-label')) ?? '', /latest lag/);

  // Long table names and topics wrap where a reader expects, never mid-word.
  assert.equal(await namesBrokenMidWord(), []);
  // What needs attention is not under 100+ tables.
  const down = await recentErrorsDown();
  assert.ok(down < 2, `“Recent errors” is ${down.toFixed(1)} screens down, under the table list`);
  assert.equal(await sidewaysOverflow(), []);
  await screenshot(page, SHOTS, '31-stripe-overview');
  await assertLabelled('Stripe overview');
  // The table list's refresh (every 6 s) renders it anew, without an error or a long task.
  await page
    .locator('table.tables tbody')
    .first()
    .evaluate((el) => el.setAttribute('data-seen', ''));
  await page.locator('table.tables tbody:not([data-seen])').first().waitFor({ timeout: 10_000 });
  // The refresh left the empty tables unfolded, as the click above made them.
  assert.is(await page.locator('details.empty-tables').getAttribute('open'), '', 'still unfolded after a refresh');
  assert.is(await rows.count(), Number(tables[0]!.n));
  const longTasks = await page.evaluate(() => (window as unknown as { longTasks: number[] }).longTasks);
  assert.ok(
    longTasks.every((ms) => ms < 500),
    `long tasks of ${longTasks.join(', ')} ms`,
  );
  assert.equal(takePageProblems(), []);
});

test('Stripe, Overview: the audit’s last round, and a silent edit found and fixed, counted by table', async () => {
  await go(`#/syncs/${stripeSync}/overview`);
  const fact = (term: string) => page.locator('dl.drift dt', { hasText: term }).locator('xpath=following-sibling::dd[1]');
  const rounds = fact('Audit (every table compared with Stripe in turn)');
  await rounds.getByText(/^the last round took /).waitFor({ timeout: 90_000 });
  assert.match((await rounds.textContent()) ?? '', /at 10 requests a second/);
  const found = fact('Found unlike Stripe in the last 24 hours, and fixed');
  assert.is((await found.textContent())?.trim(), 'nothing: the tables matched');
  // A change Stripe makes with no event: the next round finds it, the page says where.
  const customer = stripeUpstream.all('customers')[0]!;
  stripeUpstream.silentEdit('customers', customer.id as string, { name: 'Renamed with no event' });
  await found.getByText(/^1 row \(1 differing\)/).waitFor({ timeout: 90_000 });
  assert.is((await found.locator('ul.drift-tables li').textContent())?.trim(), 'customer: 1 differing');
  assert.equal(await sidewaysOverflow(), []);
  await assertLabelled('Stripe overview, drift');
  assert.equal(takePageProblems(), []);
});

test('Stripe, Connect: the psql command reads the customers; every table’s topic is listed', async () => {
  await page.getByRole('link', { name: 'Connect', exact: true }).click();
  await page.getByRole('button', { name: 'Copy psql command' }).waitFor();
  assert.match((await page.locator('#database-url').textContent()) ?? '', /^postgres:\/\/tr_\w+_ro:••••••••@/);
  await page.getByRole('button', { name: 'Copy psql command' }).click();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.ok(copied.startsWith('psql ') && copied.includes(new URL(stripeReader).password), copied);
  const { stdout } = await run('/bin/sh', ['-c', `${copied} -At -c 'select count(*) from customer'`]);
  assert.is(Number(stdout.trim()), stripeCustomers);

  const topics = await page.locator('ul.topics li').allTextContents();
  assert.ok(topics.length >= 100, `${topics.length} topics`);
  for (const object of ['customer', 'invoice', 'subscription', 'payment_intent', 'upcoming_customer_invoice']) {
    assert.ok(topics.includes(`svc.${stripeSync}.${object}`), `svc.${stripeSync}.${object} is listed`);
  }
  assert.ok(await page.getByText(`svc.${stripeSync}.customer`, { exact: true }).first().isVisible());
  await page.getByText('Proxy base for Stripe').waitFor();
  assert.equal(await namesBrokenMidWord(), []);
  assert.equal(await sidewaysOverflow(), []);
  await screenshot(page, SHOTS, '32-stripe-connect');
  await assertLabelled('Stripe connect tab');
  assert.equal(takePageProblems(), []);
});

test('Stripe, Settings: Turbo and Connected accounts; a refused change says why; Turbo takes effect', async () => {
  await page.getByRole('link', { name: 'Settings' }).click();
  const turbo = page.getByLabel('Turbo', { exact: true });
  await turbo.waitFor();
  await assertLabelled('Stripe settings');
  assert.is(await page.locator('main form input:not([type="hidden"]), main form select').count(), 2, 'Turbo and Connected accounts are Stripe’s settings');
  await page.getByText(/all of the account’s Stripe rate limit instead of 80%/).waitFor();
  assert.not.ok(await turbo.isChecked());
  const connected = page.getByLabel('Connected accounts', { exact: true });
  assert.not.ok(await connected.isChecked());
  await page.getByText(/each connected account’s objects are synced too/).waitFor();

  // Bad input reaches the server (an Airtable setting on a Stripe sync, as a stale or
  // tampered page would send it): refused, said at the form, nothing changed.
  await page.route(`**/api/syncs/${stripeSync}`, async (route) => {
    if (route.request().method() !== 'PATCH') return route.fallback();
    const body = JSON.parse(route.request().postData() ?? '{}');
    await route.continue({ postData: JSON.stringify({ settings: { ...body.settings, debounce_ms: -5 } }) });
  });
  await turbo.check();
  await page.getByRole('button', { name: 'Save settings' }).click();
  const refused = page.locator('.form-status .notice-error');
  await refused.waitFor();
  assert.match((await refused.textContent()) ?? '', /^Not saved: .*debounce_ms/);
  await page.unroute(`**/api/syncs/${stripeSync}`);
  assert.is((await request(svc.api, 'GET', `/api/syncs/${stripeSync}`, { token: acmeToken })).body.settings.turbo, false);
  await screenshot(page, SHOTS, '33-stripe-settings-refused');

  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText(/^Saved\. The sync uses the new settings from its next cycle/).waitFor();
  assert.equal((await request(svc.api, 'GET', `/api/syncs/${stripeSync}`, { token: acmeToken })).body.settings, { turbo: true, connected_accounts: false });
  await screenshot(page, SHOTS, '34-stripe-settings-saved');
  // Back to 80%, so the test's own requests to the account have room.
  await turbo.uncheck();
  await page.getByRole('button', { name: 'Save settings' }).click();
  await waitFor(
    'turbo off',
    async () => ((await request(svc.api, 'GET', `/api/syncs/${stripeSync}`, { token: acmeToken })).body.settings.turbo === false ? true : undefined),
    10_000,
  );
  assert.equal(await sidewaysOverflow(), []);
  assert.equal(takePageProblems([/status of 400/]), []);
});

test('Stripe, Webhooks: one for the customer topic delivers a change made with stripe-node', async () => {
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByLabel('Destination URL').waitFor();
  const boxes = page.locator('.topic-list input[type="checkbox"]');
  assert.ok((await boxes.count()) >= 100, `${await boxes.count()} topics to choose from`);
  const hookUrl = receiverUrl.replace('/hooks/tributary', '/hooks/stripe');
  await page.getByLabel('Destination URL').fill(hookUrl);
  await page.getByLabel(`svc.${stripeSync}.customer`, { exact: true }).check();
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.getByText('Its signing secret is shown only this once').waitFor();
  const card = page.locator('article.webhook', { hasText: hookUrl });
  await card.waitFor();
  assert.is((await card.locator('p', { hasText: /^Topics: / }).textContent())?.trim(), `Topics: svc.${stripeSync}.customer`);

  const { data } = await stripeClient.customers.list({ limit: 1 });
  await new Promise((r) => setTimeout(r, 250));
  const customer = await stripeClient.customers.update(data[0]!.id, { name: 'Console Webhook' });
  const delivery = await waitFor(
    'the delivery',
    async () => stripeHooks.find((r) => r.body.includes(customer.id) && r.body.includes('Console Webhook')),
    30_000,
  );
  assert.ok(JSON.parse(delivery.body), 'a JSON body');
  await card.locator('.delivered-count', { hasText: /^[1-9]\d* delivered/ }).waitFor({ timeout: 15_000 });
  assert.equal(await namesBrokenMidWord(), []);
  assert.equal(await sidewaysOverflow(), []);
  await screenshot(page, SHOTS, '35-stripe-webhooks');
  await assertLabelled('Stripe webhooks');
  assert.equal(takePageProblems(), []);
});

test('Stripe on a phone: the Overview’s 100+ tables are cards, nothing scrolls sideways', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    for (const [tab, name] of [
      ['overview', '36-phone-stripe-overview'],
      ['connect', '37-phone-stripe-connect'],
      ['webhooks', '38-phone-stripe-webhooks'],
    ] as const) {
      await go(`#/syncs/${stripeSync}/${tab}`);
      await page.locator('main h1').first().waitFor();
      if (tab === 'overview') {
        // An empty table: among the folded ones, unfolded here for its long name.
        const folded = page.locator('details.empty-tables');
        if ((await folded.getAttribute('open')) === null) await folded.locator('summary').click();
        await tableRow('payment_intent_amount_details_line_item').waitFor();
        await page.locator('svg.chart').waitFor({ timeout: 15_000 });
        const down = await recentErrorsDown();
        assert.ok(down < 3, `“Recent errors” is ${down.toFixed(1)} screens down, under the table list`);
      }
      if (tab === 'connect') await page.locator('ul.topics').waitFor();
      if (tab === 'webhooks') await page.locator('article.webhook').waitFor();
      await page.waitForTimeout(300);
      assert.equal(await sidewaysOverflow(), [], `#/syncs/…/${tab}`);
      assert.equal(await namesBrokenMidWord(), [], `#/syncs/…/${tab}`);
      await screenshot(page, SHOTS, name);
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 860 });
  }
  assert.equal(takePageProblems(), []);
});

test('a Stripe sync connects through the form too, its backfill shows progress; Delete asks for the sync id, then removes it', async () => {
  // An account of its own with some customers, so the backfill takes several seconds at 25 req/s
  // (longer than the list's 2 s refresh).
  const account = svc.stripe!.createAccount();
  const key = 'sk_test_consoleBackfill0000000';
  svc.stripe!.addKey(key, { account: account.id });
  account.generate({ seed: 3, customers: 60 });
  await go('#/connect');
  await page.getByLabel('Stripe account').check();
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.waitForURL(/#\/syncs\/syn_/);
  const id = /#\/syncs\/(syn_[a-z0-9]+)/.exec(page.url())![1]!;
  const extra = { body: { id } };
  await page.getByRole('heading', { name: /Stripe/ }).waitFor();

  await go('#/');
  const row = page.locator(`tr[data-sync="${id}"]`);
  const bar = row.locator('progress');
  await bar.waitFor({ timeout: 20_000 });
  assert.match((await row.locator('.progress-label').textContent()) ?? '', /^Backfill: [\d,]+ objects, \d+ of \d+ lists; \d+ of \d+ tables ready$/);
  await screenshot(page, SHOTS, '17b-syncs-stripe-backfill');
  await bar.waitFor({ state: 'detached', timeout: 60_000 });
  await row.locator('[data-indicator="normal"]').waitFor({ timeout: 20_000 });
  await row.getByRole('link').click();
  await page.getByRole('heading', { name: /Stripe/ }).waitFor();
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByText(/all of the account’s Stripe rate limit/).waitFor();
  assert.is(await page.getByLabel('Debounce Updates (ms)').count(), 0, 'Stripe has only Turbo');
  await page.getByRole('link', { name: 'Delete', exact: true }).click();
  const button = page.getByRole('button', { name: 'Delete this sync' });
  await button.waitFor();
  assert.ok(await button.isDisabled());
  await page.getByLabel(/Type the sync ID/).fill('syn_wrong');
  assert.ok(await button.isDisabled());
  await screenshot(page, SHOTS, '18-delete');
  await page.getByLabel(/Type the sync ID/).fill(extra.body.id);
  await button.click();
  await page.getByRole('heading', { name: 'Syncs' }).waitFor();
  await waitFor(
    'the sync to go',
    async () => ((await request(svc.api, 'GET', `/api/syncs/${extra.body.id}`, { token: acmeToken })).status === 404 ? true : undefined),
    10_000,
  );
  await page.locator(`tr[data-sync="${extra.body.id}"]`).waitFor({ state: 'detached' });
});

test('sign out: back to the sign-in page, and the old cookie is worthless', async () => {
  // Signed in again in another tab first: this tab's CSRF token is stale, and sign-out still works.
  const status = await page.evaluate(
    async (token) =>
      (await fetch('/console/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) })).status,
    acmeToken,
  );
  assert.is(status, 200);
  const cookie = (await context.cookies(svc.api)).find((c) => c.name === 'tributary_session')!;
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API token', { exact: true }).waitFor();
  await screenshot(page, SHOTS, '19-signed-out');
  const replayed = await request(svc.api, 'GET', '/api/syncs', { headers: { cookie: `${cookie.name}=${cookie.value}` } });
  assert.is(replayed.status, 401);
  await page.reload();
  await page.getByLabel('API token', { exact: true }).waitFor();
});

test("the operator's list of every sync names each one's account", async () => {
  await page.getByLabel('API token', { exact: true }).fill(svc.adminToken);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Syncs' }).waitFor();
  const row = page.locator('tr[data-sync]').first();
  await row.waitFor();
  await page.locator('td[data-label="Account"]', { hasText: 'acme' }).first().waitFor();
  const accounts = await page.locator('td[data-label="Account"]').allTextContents();
  assert.ok(accounts.length > 0 && accounts.every((name) => !name.startsWith('acc_')), `names, not ids: ${accounts.join(', ')}`);
  await screenshot(page, SHOTS, '20-operator-syncs');
  // The operator has no account of its own: a missing sync is just missing.
  await go('#/syncs/syn_nope');
  await page.getByRole('heading', { name: 'Sync not found' }).waitFor();
  assert.match((await page.locator('main').textContent()) ?? '', /There is no sync syn_nope\./);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API token', { exact: true }).waitFor();
  // Every refusal along the way was a 4xx with a message: the server never failed a request.
  assert.equal(
    svc.logs.lines.filter((line) => line.includes('"request failed"')),
    [],
  );
});

test.run();
