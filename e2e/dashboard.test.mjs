// End-to-end tests of the dashboard (/dashboard) in headless Chromium
// (Debian's chromium, driven by playwright-core), against a real
// `aether serve`: the live feed, the event detail, reconnection after a
// server restart without gaps or duplicates, typed errors, the sign-in form,
// exports, and a webhook dead letter redriven from the page. Screenshots of
// each view go to e2e/artifacts/ (git-ignored).
//
// Run with `make e2e` (it builds bin/aether, sets AETHER_BIN, and fails
// early with the install command when /usr/bin/chromium is missing).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { launchChromium, openDashboard as openProject, screenshot } from './browser.mjs';
import { AetherServer, WAIT_MS, eventInputs } from './harness.mjs';

const PROJECT = 'plant-1';
// Sequences are per tenant and project: a shared database gets a fresh tenant.
const TENANT = process.env.DATABASE_URL ? `acme-dash-${randomBytes(6).toString('hex')}` : 'acme';
const PERMISSIONS = 'audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive,exports:read,exports:write,exports:download';

/** The requirement: a committed event shows in the live feed within this. */
const LIVE_WITHIN_MS = 2_000;
/** How long the page may take to reconnect after the server is back. */
const RECONNECT_MS = 45_000;

/** n valid RecordAuditEventInput values for the project. */
const events = (n, action) => eventInputs(PROJECT, n, action);

/** The sequences of the feed's rows, top (newest) first. */
function feedSequences(page) {
  return page.$$eval('#feed-rows tr[data-sequence]', (rows) => rows.map((r) => r.dataset.sequence));
}

/** Opens the dashboard of PROJECT with the token in the fragment. */
const openDashboard = (context, server, token) => openProject(context, server, token, PROJECT);

describe('dashboard: live feed, detail, reconnect, errors and exports', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  let browser;
  let page;
  /** Sequences recorded so far, newest first. */
  const recorded = [];

  before(async () => {
    server = await AetherServer.start();
    token = await server.token({ tenant: TENANT, projects: [PROJECT], permissions: PERMISSIONS });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('opens from the printed link, drops the token from the address bar, and shows a recorded event within 2 s', async () => {
    page = await openDashboard(browser.context, server, token);
    assert.equal(page.url(), `${server.httpURL}/dashboard`, 'the fragment with the token is gone');
    assert.equal(await page.evaluate(() => location.hash), '');
    const cdp = await browser.context.newCDPSession(page);
    const { entries } = await cdp.send('Page.getNavigationHistory');
    await cdp.detach();
    assert.ok(entries.some((e) => e.url === `${server.httpURL}/dashboard`), JSON.stringify(entries));
    assert.ok(!entries.some((e) => e.url.includes(token)), 'no history entry keeps the token');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('aether.dashboard.token')), token);
    assert.deepEqual(await feedSequences(page), []);

    const [ev] = await server.record(token, events(1));
    recorded.unshift(ev.sequence);
    const row = page.locator(`#feed-rows tr[data-sequence="${ev.sequence}"]`);
    await row.waitFor({ timeout: LIVE_WITHIN_MS });
    assert.match(await row.innerText(), /device\.firmware\.updated/);
    assert.match(await row.innerText(), /E2E updater/);
    assert.deepEqual(await feedSequences(page), recorded);
    await screenshot(page, 'feed');
  });

  test('shows one event in a detail dialog and returns focus on Escape', async () => {
    const button = page.locator(`#feed-rows tr[data-sequence="${recorded[0]}"] button`);
    await button.focus();
    await page.keyboard.press('Enter');
    const dialog = page.locator('#event-detail');
    await dialog.waitFor({ state: 'visible', timeout: WAIT_MS });
    await page.locator('#event-detail-fields dt', { hasText: 'Chain hash' }).waitFor({ timeout: WAIT_MS });
    const text = await dialog.innerText();
    assert.match(text, new RegExp(`Event ${recorded[0]}: device\\.firmware\\.updated`));
    assert.match(text, /svc-e2e/);
    assert.match(await page.locator('#event-detail-json').innerText(), /"n": 1/);
    await screenshot(page, 'detail');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden', timeout: WAIT_MS });
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.focusKey), `event-${recorded[0]}`);
  });

  test('reconnects after the server restarts and resumes from its last sequence without duplicates', async () => {
    // Every state the connection indicator goes through.
    await page.evaluate(() => {
      const el = document.getElementById('connection');
      window.connectionStates = [];
      new MutationObserver(() => window.connectionStates.push(el.dataset.state)).observe(el, { attributes: true, attributeFilter: ['data-state'] });
    });
    await server.restart();
    // Recorded while the page is (most likely) still waiting to reconnect:
    // they reach it by the resume from its last sequence.
    for (const ev of await server.record(token, events(2))) recorded.unshift(ev.sequence);
    await page.locator('#connection[data-state="live"]').waitFor({ timeout: RECONNECT_MS });
    await page.locator(`#feed-rows tr[data-sequence="${recorded[0]}"]`).waitFor({ timeout: WAIT_MS });

    // And live again after the reconnection.
    const [ev] = await server.record(token, events(1));
    recorded.unshift(ev.sequence);
    await page.locator(`#feed-rows tr[data-sequence="${ev.sequence}"]`).waitFor({ timeout: LIVE_WITHIN_MS });

    const states = await page.evaluate(() => window.connectionStates);
    assert.ok(states.includes('reconnecting'), `the page saw the connection drop: ${states}`);
    assert.equal(states.at(-1), 'live');

    const shown = await feedSequences(page);
    assert.deepEqual(shown, recorded, 'every event once, newest first');
    assert.equal(new Set(shown).size, shown.length, 'no duplicate rows');
    assert.deepEqual(page.problems.filter((p) => !/WebSocket|ERR_CONNECTION_REFUSED|Failed to load resource/.test(p)), []);
  });

  test('shows typed GraphQL errors and moves between views with the keyboard', async () => {
    await page.fill('#project-input', 'plant-not-mine');
    await page.press('#project-input', 'Enter');
    const error = page.locator('#feed-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /^NOT_FOUND: /);

    await page.fill('#project-input', PROJECT);
    await page.press('#project-input', 'Enter');
    await error.waitFor({ state: 'hidden', timeout: WAIT_MS });
    await page.locator(`#feed-rows tr[data-sequence="${recorded[0]}"]`).waitFor({ timeout: WAIT_MS });
    assert.deepEqual(await feedSequences(page), recorded);

    await page.focus('#tab-feed');
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'tab-webhooks');
    assert.equal(await page.getAttribute('#tab-webhooks', 'aria-selected'), 'true');
    assert.equal(await page.isVisible('#view-webhooks'), true);
    assert.equal(await page.isVisible('#view-feed'), false);
    await page.keyboard.press('Home');
    assert.equal(await page.getAttribute('#tab-feed', 'aria-selected'), 'true');
  });

  test('asks for a token when opened without one, and refuses a bad one with its code', async () => {
    const other = await browser.context.newPage();
    try {
      await other.goto(`${server.httpURL}/dashboard`);
      await other.locator('#sign-in').waitFor({ state: 'visible', timeout: WAIT_MS });
      assert.equal(await other.isVisible('#app'), false);

      await other.fill('#token-input', 'not-a-token');
      await other.fill('#sign-in-project', PROJECT);
      await other.click('#sign-in-form button[type="submit"]');
      const error = other.locator('#sign-in-error');
      await error.waitFor({ state: 'visible', timeout: WAIT_MS });
      assert.match(await error.innerText(), /^UNAUTHENTICATED: /);
      assert.equal(await other.evaluate(() => sessionStorage.getItem('aether.dashboard.token')), null);

      await other.fill('#token-input', token);
      await other.click('#sign-in-form button[type="submit"]');
      await other.locator(`#feed-rows tr[data-sequence="${recorded[0]}"]`).waitFor({ timeout: WAIT_MS });
      assert.equal(await other.isVisible('#sign-in'), false);
    } finally {
      await other.close();
    }
  });

  test('requests an export after confirmation, follows it to READY and offers a download link', async () => {
    await page.click('#tab-exports');
    await page.locator('#export-rows tr').first().waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('#export-rows tr[data-export-id]').count(), 0);

    // Cancelling the confirmation requests nothing.
    await page.click('#export-form button[type="submit"]');
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await page.locator('#confirm-text').innerText(), /audit history of project plant-1/);
    await page.click('#confirm-cancel');
    await page.locator('#confirm').waitFor({ state: 'hidden', timeout: WAIT_MS });
    const { body: none } = await server.graphql(token, '{ dataExports(projectId: "plant-1") { edges { node { id } } } }');
    assert.deepEqual(none.data.dataExports.edges, []);

    await page.click('#export-form button[type="submit"]');
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    await page.click('#confirm-ok');
    await page.locator('#export-rows tr[data-export-id]').waitFor({ timeout: WAIT_MS });
    const ready = page.locator('#export-rows tr[data-state="READY"]');
    await ready.waitFor({ timeout: 60_000 });
    assert.match(await ready.innerText(), /AUDIT/);

    await ready.locator('[data-action="download"]').click();
    const link = page.locator('a[data-role="download-link"]');
    await link.waitFor({ timeout: WAIT_MS });
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.role), 'download-link');
    await screenshot(page, 'exports');

    // Without a public URL the link is relative; the browser resolves it
    // against the page.
    assert.match(await link.getAttribute('href'), /^\/api\/v1\/exports\/download\//);
    const href = await link.evaluate((a) => a.href);
    assert.match(href, new RegExp(`^${server.httpURL}/api/v1/exports/download/`));
    const res = await fetch(href, { signal: AbortSignal.timeout(WAIT_MS) });
    assert.equal(res.status, 200);
    const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
    for (const seq of recorded) {
      assert.ok(lines.some((e) => e.sequence === seq), `the export holds event ${seq}`);
    }
  });
});

describe('dashboard: webhook dead letter redriven from the page', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  let browser;
  let receiver;
  /** What the receiver answers next. */
  let receiverStatus = 500;
  /** webhook-id header of each request received. */
  const received = [];

  before(async () => {
    receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received.push({ id: req.headers['webhook-id'], status: receiverStatus });
        res.writeHead(receiverStatus, { 'Content-Type': 'text/plain' }).end(receiverStatus === 200 ? 'ok' : 'receiver down');
      });
    });
    await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    server = await AetherServer.start({
      env: {
        AETHER_WEBHOOK_ALLOW_HTTP: 'true',
        AETHER_WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        AETHER_WEBHOOK_RETRY_SCHEDULE: '100ms',
      },
    });
    token = await server.token({ tenant: TENANT, projects: [PROJECT], permissions: PERMISSIONS });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((resolve) => receiver?.close(resolve) ?? resolve());
  });

  test('shows destinations, subscriptions, deliveries and dead letters, and redrives after confirmation', async () => {
    const { body: dest } = await server.graphql(
      token,
      `mutation($in: CreateWebhookDestinationInput!) { createWebhookDestination(input: $in) { destination { id url } } }`,
      { in: { projectId: PROJECT, url: `http://127.0.0.1:${receiver.address().port}/hook`, description: 'e2e receiver' } },
    );
    assert.ok(dest.data?.createWebhookDestination, JSON.stringify(dest));
    const destination = dest.data.createWebhookDestination.destination;
    const { body: sub } = await server.graphql(
      token,
      `mutation($in: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $in) { subscription { id } } }`,
      { in: { projectId: PROJECT, destinationId: destination.id, eventTypes: ['device.*'] } },
    );
    assert.ok(sub.data?.createWebhookSubscription, JSON.stringify(sub));

    const page = await openDashboard(browser.context, server, token);
    await page.click('#tab-webhooks');
    await page.locator('#destination-rows tr', { hasText: destination.url }).waitFor({ timeout: WAIT_MS });
    await page.locator('#subscription-rows tr', { hasText: 'device.*' }).waitFor({ timeout: WAIT_MS });

    const [ev] = await server.record(token, events(1));
    const dead = page.locator('#dead-letter-rows tr[data-delivery-id]');
    await dead.waitFor({ timeout: 60_000 });
    assert.match(await dead.innerText(), new RegExp(`${ev.sequence}\\s+device\\.firmware\\.updated`));
    assert.match(await dead.innerText(), /2\/2/);
    const deliveryId = await dead.getAttribute('data-delivery-id');
    const delivery = page.locator(`#delivery-rows tr[data-delivery-id="${deliveryId}"]`);
    await delivery.locator('summary').click();
    assert.match(await delivery.innerText(), /FAILED/);
    await screenshot(page, 'webhooks');

    // Cancel first: nothing changes.
    await dead.locator('[data-action="redrive"]').click();
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await page.locator('#confirm-text').innerText(), /same webhook-id/);
    await page.keyboard.press('Escape');
    await page.locator('#confirm').waitFor({ state: 'hidden', timeout: WAIT_MS });
    const { body: still } = await server.graphql(token, `query($id: ID!) { webhookDelivery(id: $id) { state } }`, { id: deliveryId });
    assert.equal(still.data.webhookDelivery.state, 'DEAD_LETTERED');

    receiverStatus = 200;
    await dead.locator('[data-action="redrive"]').click();
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    await screenshot(page, 'webhooks-redrive-confirm');
    await page.click('#confirm-ok');
    await page.locator(`#delivery-rows tr[data-delivery-id="${deliveryId}"][data-state="DELIVERED"]`).waitFor({ timeout: 60_000 });
    await page.locator('#dead-letter-rows tr[data-delivery-id]').waitFor({ state: 'detached', timeout: WAIT_MS });
    assert.match(await page.locator('#webhooks-status').innerText(), /redriven/);
    await screenshot(page, 'webhooks-delivered');

    assert.deepEqual(received.map((r) => r.status), [500, 500, 200]);
    assert.equal(new Set(received.map((r) => r.id)).size, 1, 'one webhook-id across attempts and the redrive');
  });

  test('disables, enables and deletes a destination after confirmation, showing its state and health', async () => {
    const { body: dest } = await server.graphql(
      token,
      `mutation($in: CreateWebhookDestinationInput!) { createWebhookDestination(input: $in) { destination { id url } } }`,
      { in: { projectId: PROJECT, url: `http://127.0.0.1:${receiver.address().port}/lifecycle`, description: 'lifecycle' } },
    );
    assert.ok(dest.data?.createWebhookDestination, JSON.stringify(dest));
    const destination = dest.data.createWebhookDestination.destination;
    const stateOf = async () =>
      (await server.graphql(token, `query($id: ID!) { webhookDestination(id: $id) { state } }`, { id: destination.id })).body.data
        .webhookDestination?.state ?? null;

    const page = await openDashboard(browser.context, server, token);
    await page.click('#tab-webhooks');
    const row = page.locator(`#destination-rows tr[data-destination-id="${destination.id}"]`);
    await row.waitFor({ timeout: WAIT_MS });
    assert.match(await row.innerText(), /ENABLED/);
    assert.match(await row.innerText(), /CLOSED/);
    assert.match(await row.innerText(), /no attempts in the last hour/);

    // Cancel first: nothing changes.
    await row.locator('[data-action="disable"]').click();
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await page.locator('#confirm-text').innerText(), /PAUSED/);
    await page.keyboard.press('Escape');
    await page.locator('#confirm').waitFor({ state: 'hidden', timeout: WAIT_MS });
    assert.equal(await stateOf(), 'ENABLED');

    await row.locator('[data-action="disable"]').click();
    await page.click('#confirm-ok');
    await page.locator(`#destination-rows tr[data-destination-id="${destination.id}"][data-state="DISABLED"]`).waitFor({ timeout: WAIT_MS });
    assert.equal(await stateOf(), 'DISABLED');
    assert.match(await row.innerText(), /disabled from the dashboard/);
    await screenshot(page, 'webhooks-destination-disabled');

    await row.locator('[data-action="enable"]').click();
    await page.click('#confirm-ok');
    await page.locator(`#destination-rows tr[data-destination-id="${destination.id}"][data-state="ENABLED"]`).waitFor({ timeout: WAIT_MS });
    assert.equal(await stateOf(), 'ENABLED');

    await row.locator('[data-action="delete"]').click();
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await page.locator('#confirm-text').innerText(), /cancelled/);
    await page.click('#confirm-ok');
    await row.waitFor({ state: 'detached', timeout: WAIT_MS });
    assert.equal(await stateOf(), null, 'deleted: no query shows it');
  });
});
