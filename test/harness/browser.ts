import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import chromium from '@sparticuz/chromium';
import { chromium as playwright, type Browser, type Page } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Screenshots and other files a test leaves for people to look at (gitignored). */
export const ARTIFACTS_DIR = path.join(root, 'test-artifacts');

/**
 * Switches of @sparticuz/chromium's defaults (made for serverless sandboxes) that would make
 * the browser less of a browser: without the same-origin policy, a test of what other
 * origins can do would prove nothing.
 */
const DROPPED_ARGS = new Set(['--disable-web-security', '--allow-running-insecure-content']);

/**
 * The headless Chromium that the @sparticuz/chromium npm package ships (unpacked into the
 * temp folder on first use), driven by playwright-core. Nothing is downloaded.
 */
export async function launchBrowser(): Promise<Browser> {
  const executablePath = await chromium.executablePath();
  return playwright.launch({
    executablePath,
    args: chromium.args.filter((arg) => !DROPPED_ARGS.has(arg)),
    headless: true,
  });
}

/** Saves a full-page screenshot under test-artifacts/<folder>/<name>.png. */
export async function screenshot(page: Page, folder: string, name: string): Promise<string> {
  const dir = path.join(ARTIFACTS_DIR, folder);
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}
