// End-to-end tests of the dashboard's "Verify chain" view in headless
// Chromium against a real `aether serve` whose verification steps are 100
// events (AETHER_VERIFY_STEP_EVENTS), so that a project of 450 events is
// verified in five steps: the page shows the progress items of the
// auditChainVerification subscription it runs over its WebSocket, then the
// verdict; a chain broken through the database (as its owner) shows where;
// a refused range shows the API's error.
//
// Run with `make e2e`.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { launchChromium, openDashboard, screenshot } from './browser.mjs';
import { AetherServer, WAIT_MS, deferred, eventInputs, withDeadline } from './harness.mjs';

const PROJECT = 'plant-verify';
// Sequences are per tenant and project: a shared database gets a fresh tenant.
const TENANT = process.env.DATABASE_URL ? `acme-verify-${randomBytes(6).toString('hex')}` : 'acme';
const EVENTS = 450;
const STEP = 100;

describe('dashboard: verify chain', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  let browser;
  let page;

  before(async () => {
    server = await AetherServer.start({ env: { AETHER_VERIFY_STEP_EVENTS: String(STEP) } });
    token = await server.token({ tenant: TENANT, projects: [PROJECT], permissions: 'audit:read,audit:write' });
    for (let left = EVENTS; left > 0; left -= 50) await server.record(token, eventInputs(PROJECT, Math.min(50, left)));
    browser = await launchChromium();
    page = await openDashboard(browser.context, server, token, PROJECT);
    await page.locator('#tab-verify').click();
    await page.locator('#view-verify').waitFor({ state: 'visible', timeout: WAIT_MS });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  /** What the WebSocket proxy of the last tests does and saw. */
  const proxy = { drop: false, hold: false, held: 0, verifyIds: new Set(), onComplete: null };

  /**
   * Starts a verification from the page and returns the verdict element
   * once it is shown, with every sequence the progress line reached.
   */
  async function verify() {
    await page.evaluate(() => {
      const el = document.getElementById('verify-progress');
      window.verifyReached = [];
      window.verifyObserver?.disconnect();
      window.verifyObserver = new MutationObserver(() => {
        if (el.dataset.reached) window.verifyReached.push(el.dataset.reached);
      });
      window.verifyObserver.observe(el, { attributes: true, attributeFilter: ['data-reached'] });
    });
    await page.locator('#verify-start').click();
    const verdict = page.locator('#verify-verdict[data-verdict]');
    await verdict.waitFor({ timeout: WAIT_MS });
    const reached = await page.evaluate(() => window.verifyReached);
    return { verdict, reached };
  }

  test('verifies the seeded project with live progress and a valid verdict', async () => {
    const { verdict, reached } = await verify();
    assert.equal(await verdict.getAttribute('data-verdict'), 'valid');
    assert.deepEqual(reached, ['100', '200', '300', '400', '450'], 'a progress line per step, then the verdict');
    assert.match(await verdict.innerText(), /^Valid: 450 events (and \d+ signed checkpoints? )?recomputed and matched, through sequence 450 \(head 450\)\.$/);
    assert.match(await page.locator('#verify-progress').innerText(), /Checked 450 events, through sequence 450 of 450, [\d,.\s]+ events\/s/);
    assert.equal(await page.locator('#verify-error').isHidden(), true);
    assert.equal(await page.locator('#verify-start').isDisabled(), false, 'a finished verification can run again');
    assert.equal(await page.locator('#verify-cancel').isDisabled(), true);
    await screenshot(page, 'verify-valid');
    assert.deepEqual(page.problems, []);
  });

  test('shows the first broken sequence of a chain tampered through the database', async () => {
    await server.tamperEvent(TENANT, PROJECT, 250);
    const { verdict, reached } = await verify();
    assert.equal(await verdict.getAttribute('data-verdict'), 'broken');
    assert.equal(await verdict.getAttribute('data-sequence'), '250');
    assert.match(await verdict.innerText(), /Broken at sequence 250: .*no longer matches its stored chain hash/);
    assert.match(await verdict.innerText(), /The 249 events before it match/);
    assert.deepEqual(reached, ['100', '200', '249']);
    await screenshot(page, 'verify-broken');
    assert.deepEqual(page.problems, []);
  });

  test('resumes from the last progress item when the socket drops mid-verification', async () => {
    await page.close();
    // Every WebSocket of the next page goes through this proxy, which
    // passes messages both ways, records the page's subscribe messages of
    // the verification, and drops the socket (close 1012, as a restarting
    // server would) right after the first progress item reached the page
    // (proxy.drop), or passes only the first message of a verification
    // and none after it (proxy.hold).
    proxy.drop = true;
    const subscribes = [];
    let dropped = false;
    await browser.context.routeWebSocket(/\/graphql$/, (ws) => {
      const upstream = ws.connectToServer();
      ws.onMessage((message) => {
        const msg = JSON.parse(String(message));
        if (msg.type === 'subscribe' && msg.payload.query.includes('auditChainVerification')) {
          subscribes.push(msg.payload.variables);
          proxy.verifyIds.add(msg.id);
        }
        if (msg.type === 'complete' && proxy.verifyIds.has(msg.id)) proxy.onComplete?.(msg.id);
        upstream.send(message);
      });
      upstream.onMessage((message) => {
        const msg = JSON.parse(String(message));
        const item = msg.type === 'next' ? msg.payload.data?.auditChainVerification : undefined;
        if (proxy.hold && proxy.verifyIds.has(msg.id) && proxy.held++ > 0) return;
        ws.send(message);
        if (proxy.drop && !dropped && item?.complete === false) {
          dropped = true;
          ws.close({ code: 1012, reason: 'proxy drop' });
          upstream.close();
        }
      });
    });
    page = await openDashboard(browser.context, server, token, PROJECT);
    await page.locator('#tab-verify').click();
    await page.locator('#verify-from').fill('1');
    await page.locator('#verify-to').fill('200');
    const { verdict, reached } = await verify();
    assert.ok(dropped, 'the socket was dropped mid-verification');
    assert.equal(await verdict.getAttribute('data-verdict'), 'valid');
    assert.match(await verdict.innerText(), /^Valid: 200 events/, 'the count goes on across the drop');
    assert.equal(subscribes.length, 2, JSON.stringify(subscribes));
    assert.deepEqual(subscribes[0], { p: PROJECT, from: '1', to: '200' });
    assert.deepEqual(Object.keys(subscribes[1]).sort(), ['p', 'resume'], 'the second subscribe resumes, without the range');
    assert.deepEqual(reached, ['100', '200']);
    await page.locator('#verify-from').fill('');
    await page.locator('#verify-to').fill('');
  });

  test('cancels a verification under way: the subscription is completed and the progress kept', async () => {
    proxy.drop = false;
    proxy.hold = true;
    await page.evaluate(() => {
      window.verifyReached = [];
    });
    await page.locator('#verify-start').click();
    await page.locator('#verify-progress[data-reached="100"]').waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.equal(await page.locator('#verify-start').isDisabled(), true, 'one verification at a time');
    const completed = deferred();
    proxy.onComplete = completed.resolve;
    await page.locator('#verify-cancel').click();
    const verdict = page.locator('#verify-verdict[data-verdict="cancelled"]');
    await verdict.waitFor({ timeout: WAIT_MS });
    assert.match(await verdict.innerText(), /^Cancelled after 100 events \(through sequence 100\)/);
    const id = [...proxy.verifyIds].at(-1);
    assert.equal(await withDeadline(completed.promise, "the page's complete message"), id);
    assert.equal(await page.locator('#verify-start').isDisabled(), false);
    proxy.hold = false;
  });

  test('shows a refused range as the API answered it', async () => {
    await page.locator('#verify-from').fill('9');
    await page.locator('#verify-to').fill('3');
    await page.locator('#verify-start').click();
    const error = page.locator('#verify-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /^BAD_USER_INPUT: /);
    assert.equal(await page.locator('#verify-verdict').isHidden(), true);
    assert.equal(await page.locator('#verify-start').isDisabled(), false);
  });
});
