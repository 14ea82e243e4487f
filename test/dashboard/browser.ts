/**
 * Debian's Chromium (`/usr/bin/chromium`, installed by scripts/ensure-chromium.sh) driven by playwright-core:
 * headless, with a fresh profile, and without the background traffic this machine's closed network refuses.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * Where the browser tests write their page screenshots: the user guide's `docs/dashboard/` with
 * HORSIES_DOCS_SCREENSHOTS=1 (to refresh its pictures), otherwise a temporary folder, so that a test run leaves the
 * checkout as it was.
 */
export const SCREENSHOTS = process.env.HORSIES_DOCS_SCREENSHOTS
  ? resolve(import.meta.dirname, '../../docs/dashboard')
  : mkdtempSync(join(tmpdir(), 'horsies-screenshots-'));
mkdirSync(SCREENSHOTS, { recursive: true });

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A browser context on a new, empty profile; `close` ends the browser and removes the profile. */
export async function launchBrowser(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'horsies-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: FLAGS,
    viewport: { width: 1360, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Closes every page of `context` after a test. When the test failed, each page is left behind first: a screenshot in
 * a temporary file named after `label`, and its address, its text and `notes` in the error log.
 */
export async function closePages(
  context: BrowserContext,
  failed: boolean,
  label: string,
  notes = '',
): Promise<void> {
  for (const [i, page] of context.pages().entries()) {
    if (failed) {
      const file = join(tmpdir(), `horsies-dashboard-failed-${label}-${i}.png`);
      await page.screenshot({ path: file, fullPage: true }).catch(() => undefined);
      const text = await page
        .locator('body')
        .innerText()
        .catch(() => '(no text)');
      console.error(`page ${page.url()} (screenshot ${file})${notes ? `; ${notes}` : ''}:\n${text}`);
    }
    await page.close();
  }
}
