/**
 * The console's weight and first render, in the headless Chromium the tests use.
 *
 *   node --import tsx bench/console.ts [--syncs 20] [--loads 7]
 *
 * An account with N running Airtable syncs signs in once; then each load is a fresh browser
 * context (empty cache, the session cookie only) opening `/`, and the figure is the time from
 * navigation start to the console's first rendered view: for a signed-in user, the syncs list
 * with its rows, which waits for `GET /api/syncs`. Reloads (files revalidated) are measured too.
 *
 * Reference in the same run: the same browser opening a document the same server answers with
 * no work at all (`/healthz`), in a fresh context: the floor any page here pays.
 * Weight: what a cold load moved over the wire for the console's own files (gzip).
 */
import type { Browser, Page } from 'playwright-core';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { launchBrowser } from '../test/harness/browser.ts';
import { api, arg, percentile, sleep, startPostgres, startServiceProcess } from './lib.ts';

const syncs = arg('syncs', 20);
const loads = arg('loads', 7);
const TOKEN = 'patBENCHBENCHBEN.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const BUDGET_MS = 1000;
const BUDGET_BYTES = 150 * 1024;

const postgres = await startPostgres();
const fake = await startFakeAirtable({});
fake.addToken(TOKEN, { bases: '*' });
const svc = await startServiceProcess({
  controlUrl: await postgres.freshDatabase('ctl'),
  targetUrl: postgres.adminUrl,
  upstreams: `api.airtable.com=${fake.url}`,
});
let browser: Browser | undefined;
try {
  const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
  const token = account.api_token as string;
  for (let i = 0; i < syncs; i++) {
    const base = fake.createBase({ name: `Base ${i + 1}` });
    base.generate({ seed: i, tables: [{ name: 'Items', records: 20 }] });
    await api(svc.api, token, 'POST', '/api/syncs', { kind: 'airtable', base_id: base.id, api_key: TOKEN });
  }
  // Every sync has a status worth showing (a completed cycle) before the page is measured.
  for (;;) {
    const list = await api(svc.api, token, 'GET', '/api/syncs');
    if (list.data.every((s: any) => s.status.completed_at)) break;
    await sleep(250);
  }

  browser = await launchBrowser();
  const signedIn = await browser.newContext();
  const page = await signedIn.newPage();
  await page.goto(`${svc.api}/`);
  await page.getByLabel('API token', { exact: true }).fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('tr[data-sync]').first().waitFor();
  const session = await signedIn.storageState();
  // Contexts stay open until the end: @sparticuz/chromium runs single-process, and closing a
  // context there can end the whole browser.
  await page.goto('about:blank');

  /** Opens `url` in a fresh context (empty cache, the session cookie). */
  const fresh = async (url: string): Promise<Page> => {
    const context = await browser!.newContext({ storageState: session });
    const p = await context.newPage();
    await p.goto(url);
    return p;
  };

  const cold: number[] = [];
  const warm: number[] = [];
  const floor: number[] = [];
  let wire = 0;
  let files = 0;
  let rowsShown = 0;
  for (let i = 0; i < loads; i++) {
    const p = await fresh(`${svc.api}/`);
    await p.waitForFunction(() => performance.getEntriesByName('console-first-render').length > 0);
    cold.push(await p.evaluate(() => performance.getEntriesByName('console-first-render')[0]!.startTime));
    rowsShown = await p.locator('tr[data-sync]').count();
    if (i === 0) {
      const sizes = await p.evaluate(() =>
        [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
          .map((e) => e as PerformanceResourceTiming)
          .filter((e) => !new URL(e.name).pathname.startsWith('/api/'))
          .map((e) => e.encodedBodySize),
      );
      files = sizes.length;
      wire = sizes.reduce((a, b) => a + b, 0);
    }
    await p.reload();
    await p.waitForFunction(() => performance.getEntriesByName('console-first-render').length > 0);
    warm.push(await p.evaluate(() => performance.getEntriesByName('console-first-render')[0]!.startTime));
    await p.close();

    const bare = await fresh(`${svc.api}/healthz`);
    floor.push(await bare.evaluate(() => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventEnd));
    await bare.close();
  }
  if (rowsShown !== syncs) throw new Error(`the syncs list showed ${rowsShown} rows, expected ${syncs}`);

  const p50 = (values: number[]) => percentile(values, 50);
  const ms = (value: number) => `${value.toFixed(0)} ms`;
  console.log(`Console, an account with ${syncs} Airtable syncs, ${loads} loads each (headless Chromium)`);
  console.log(
    `  weight of a cold load:        ${(wire / 1024).toFixed(1)} kB over the wire in ${files} files (${(wire / BUDGET_BYTES).toFixed(2)} of the 150 kB budget)`,
  );
  console.log(`  first render, fresh context:  p50 ${ms(p50(cold))}, max ${ms(Math.max(...cold))} (${(p50(cold) / BUDGET_MS).toFixed(2)} of the 1 s budget)`);
  console.log(`  first render, reload:         p50 ${ms(p50(warm))}, max ${ms(Math.max(...warm))}`);
  console.log(`  floor, /healthz loaded:       p50 ${ms(p50(floor))}`);
  console.log(`  first render ÷ floor (p50):   ${(p50(cold) / p50(floor)).toFixed(1)}×`);
} finally {
  await browser?.close();
  await svc.stop();
  await fake.close();
  await postgres.stop();
}
