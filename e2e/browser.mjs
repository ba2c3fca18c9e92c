// Headless Chromium for the dashboard tests: Debian's chromium package,
// driven by playwright-core through executablePath (playwright's own browser
// downloads are never used), with a fresh profile per launch.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { WAIT_MS } from './harness.mjs';

/** The browser under test: Debian's chromium, or CHROMIUM_PATH. */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** The command that installs it on this kind of machine. */
export const CHROMIUM_INSTALL = 'apt-get install -y chromium';

/** Where screenshots go (git-ignored). */
export const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));

const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Launches headless Chromium with a fresh user-data-dir; returns
 * { context, close() }. Fails with the install command when the browser is
 * missing.
 */
export async function launchChromium() {
  try {
    fs.accessSync(CHROMIUM, fs.constants.X_OK);
  } catch {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium with \`${CHROMIUM_INSTALL}\` (as root)`);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true, // playwright passes --headless
      args: ARGS,
      viewport: { width: 1280, height: 860 },
      timeout: 60_000,
    });
  } catch (err) {
    fs.rmSync(profile, { recursive: true, force: true });
    throw err;
  }
  return {
    context,
    async close() {
      try {
        await context.close();
      } finally {
        fs.rmSync(profile, { recursive: true, force: true });
      }
    },
  };
}

/** Saves a full-page screenshot as e2e/artifacts/<name>.png. */
export async function screenshot(page, name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/**
 * Opens the dashboard of project with the token in the fragment, as `make
 * run` prints it, and waits for the live feed; the page's problems (page
 * errors, console errors) collect in page.problems.
 */
export async function openDashboard(context, server, token, project) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  await page.goto(`${server.httpURL}/dashboard#token=${token}&project=${project}`);
  await page.locator('#connection[data-state="live"]').waitFor({ timeout: WAIT_MS });
  return Object.assign(page, { problems });
}
