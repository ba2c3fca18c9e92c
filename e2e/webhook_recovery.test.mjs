// End-to-end tests of the dashboard's webhook recovery actions in headless
// Chromium (Debian's chromium, driven by playwright-core), against a real
// `aether serve` and a real HTTP receiver: a test event sent from a
// destination's row, failed deliveries recovered since a time, and a range
// of events replayed to a subscription. Each action is performed in the
// page, after its confirmation where it asks for one; its result is checked
// in the page, through the API and at the receiver.
//
// Run with `make e2e`.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { launchChromium, openDashboard, screenshot } from './browser.mjs';
import { AetherServer, WAIT_MS, eventInputs } from './harness.mjs';

const PROJECT = 'plant-2';
// Sequences are per tenant and project: a shared database gets a fresh tenant.
const TENANT = process.env.DATABASE_URL ? `acme-recovery-${randomBytes(6).toString('hex')}` : 'acme';
const PERMISSIONS = 'audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive';

/** How long deliveries may take to reach their end state. */
const DELIVERY_MS = 60_000;

const DELIVERY_FIELDS = 'id state idempotencyKey eventSequence replayOf attemptCount';

describe('dashboard: webhook recovery, replay and test event', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  let browser;
  let page;
  let receiver;
  /** What the receiver answers next. */
  let receiverStatus = 200;
  /** Each request received: webhook-id, the body's type, the answer. */
  const received = [];
  let destination;
  let subscription;

  /** Every delivery of the subscription, through the API. */
  async function deliveries() {
    const { body } = await server.graphql(
      token,
      `query($p: ID!, $f: WebhookDeliveryFilter) { webhookDeliveries(projectId: $p, filter: $f, first: 100) { edges { node { ${DELIVERY_FIELDS} } } } }`,
      { p: PROJECT, f: { subscriptionId: subscription.id } },
    );
    assert.ok(body.data?.webhookDeliveries, JSON.stringify(body));
    return body.data.webhookDeliveries.edges.map((e) => e.node);
  }

  /** The project's audit events of action, through the API. */
  async function auditEvents(action) {
    const { body } = await server.graphql(
      token,
      `query($p: ID!, $f: AuditEventFilter) { auditEvents(projectId: $p, filter: $f, first: 10) { edges { node { id action details } } } }`,
      { p: PROJECT, f: { action } },
    );
    assert.ok(body.data?.auditEvents, JSON.stringify(body));
    return body.data.auditEvents.edges.map((e) => e.node);
  }

  /** Waits until cond() holds (polled), failing with what it last saw. */
  async function until(cond, what, timeoutMs = DELIVERY_MS) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
      last = await cond();
      if (last === true) return;
      if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms (last: ${JSON.stringify(last)})`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Confirms the open confirmation dialog, after checking its text. */
  async function confirm(textPattern) {
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await page.locator('#confirm-text').innerText(), textPattern);
    await page.click('#confirm-ok');
    await page.locator('#confirm').waitFor({ state: 'hidden', timeout: WAIT_MS });
  }

  /** The text the action put in the view's status line. */
  async function status(pattern) {
    await page.waitForFunction((re) => new RegExp(re).test(document.getElementById('webhooks-notice').textContent), pattern.source, {
      timeout: WAIT_MS,
    });
    return page.locator('#webhooks-notice').innerText();
  }

  before(async () => {
    receiver = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        let type;
        try {
          type = JSON.parse(Buffer.concat(chunks).toString()).type;
        } catch {
          type = null;
        }
        const status = receiverStatus;
        received.push({ id: req.headers['webhook-id'], signed: Boolean(req.headers['webhook-signature']), type, status });
        res.writeHead(status, { 'Content-Type': 'text/plain' }).end(status === 200 ? 'ok' : 'receiver down');
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

    const { body: dest } = await server.graphql(
      token,
      `mutation($in: CreateWebhookDestinationInput!) { createWebhookDestination(input: $in) { destination { id url } } }`,
      { in: { projectId: PROJECT, url: `http://127.0.0.1:${receiver.address().port}/recovery`, description: 'recovery receiver' } },
    );
    assert.ok(dest.data?.createWebhookDestination, JSON.stringify(dest));
    destination = dest.data.createWebhookDestination.destination;
    const { body: sub } = await server.graphql(
      token,
      `mutation($in: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $in) { subscription { id } } }`,
      { in: { projectId: PROJECT, destinationId: destination.id, eventTypes: ['device.*'] } },
    );
    assert.ok(sub.data?.createWebhookSubscription, JSON.stringify(sub));
    subscription = sub.data.createWebhookSubscription.subscription;

    page = await openDashboard(browser.context, server, token, PROJECT);
    await page.click('#tab-webhooks');
    await page.locator(`#destination-rows tr[data-destination-id="${destination.id}"]`).waitFor({ timeout: WAIT_MS });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((resolve) => receiver?.close(resolve) ?? resolve());
  });

  test('sends a signed test event from the destination row and shows its outcome, succeeded and failed', async () => {
    const row = page.locator(`#destination-rows tr[data-destination-id="${destination.id}"]`);
    receiverStatus = 200;
    await row.locator('[data-action="test-event"]').click();
    const ok = await status(/^Test event to /);
    assert.equal(ok, `Test event to ${destination.url}: SUCCEEDED (HTTP 200).`);
    assert.equal(received.length, 1);
    assert.equal(received[0].type, 'webhook.test');
    assert.ok(received[0].signed, 'the test event is signed');
    assert.match(received[0].id, /^msg_test_/);
    await screenshot(page, 'webhooks-test-event');

    receiverStatus = 500;
    await page.evaluate(() => {
      document.getElementById('webhooks-notice').textContent = '';
    });
    await row.locator('[data-action="test-event"]').click();
    const failed = await status(/^Test event to /);
    assert.match(failed, /: FAILED \(HTTP 500\)/);
    assert.equal(received.length, 2, 'one request, not retried');
    assert.notEqual(received[1].id, received[0].id, 'each test event has its own webhook-id');

    // Through the API: each test event is audited, and none is stored as a
    // delivery.
    const sent = await auditEvents('webhook.destination.test_sent');
    assert.equal(sent.length, 2, JSON.stringify(sent));
    assert.deepEqual(await deliveries(), []);
  });

  test('recovers the failed deliveries of a destination since a time, after confirmation', async () => {
    receiverStatus = 500;
    received.length = 0;
    // A minute back, in UTC as the form takes it (datetime-local, seconds).
    const since = new Date(Date.now() - 60_000).toISOString().slice(0, 19);
    const events = await server.record(token, eventInputs(PROJECT, 3));
    const dead = page.locator('#dead-letter-rows tr[data-delivery-id]');
    await until(async () => (await dead.count()) === 3 || (await dead.count()), 'three dead letters in the page');
    const before = await deliveries();
    assert.deepEqual(before.map((d) => d.state), ['DEAD_LETTERED', 'DEAD_LETTERED', 'DEAD_LETTERED']);

    await page.selectOption('#recover-destination', destination.id);
    await page.fill('#recover-since', since);

    // Cancelling the confirmation recovers nothing.
    await page.click('#recover-form button[type="submit"]');
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    await page.keyboard.press('Escape');
    await page.locator('#confirm').waitFor({ state: 'hidden', timeout: WAIT_MS });
    assert.deepEqual((await deliveries()).map((d) => d.state), ['DEAD_LETTERED', 'DEAD_LETTERED', 'DEAD_LETTERED']);
    assert.deepEqual(await auditEvents('webhook.deliveries.recovered'), []);

    receiverStatus = 200;
    await page.click('#recover-form button[type="submit"]');
    await screenshot(page, 'webhooks-recover-confirm');
    await confirm(new RegExp(`${destination.url}.*since ${since}`));
    assert.equal(await status(/re-queued/), '3 deliveries re-queued.');

    // In the page: the dead letters go, the deliveries show DELIVERED.
    await dead.first().waitFor({ state: 'detached', timeout: DELIVERY_MS });
    for (const d of before) {
      await page.locator(`#delivery-rows tr[data-delivery-id="${d.id}"][data-state="DELIVERED"]`).waitFor({ timeout: DELIVERY_MS });
    }
    await screenshot(page, 'webhooks-recovered');

    // Through the API: the same deliveries DELIVERED, the command audited.
    await until(async () => {
      const now = await deliveries();
      return now.every((d) => d.state === 'DELIVERED') || now.map((d) => d.state);
    }, 'every recovered delivery DELIVERED');
    const recovered = await auditEvents('webhook.deliveries.recovered');
    assert.equal(recovered.length, 1, JSON.stringify(recovered));

    // At the receiver: each event's failed attempts and its recovery under
    // one webhook-id.
    const ids = before.map((d) => d.idempotencyKey);
    for (const id of ids) {
      assert.deepEqual(received.filter((r) => r.id === id).map((r) => r.status), [500, 500, 200], `requests of ${id}`);
    }
    assert.deepEqual(
      before.map((d) => d.eventSequence).sort(),
      events.map((e) => e.sequence).sort(),
    );
  });

  test('replays a range of events to a subscription as new deliveries with new webhook-ids, after confirmation', async () => {
    receiverStatus = 200;
    const originals = await deliveries();
    const sequences = originals.map((d) => BigInt(d.eventSequence)).sort((a, b) => (a < b ? -1 : 1));
    const [from, to] = [sequences[0], sequences.at(-1)];

    await page.selectOption('#replay-subscription', subscription.id);
    await page.fill('#replay-from', String(from));
    await page.fill('#replay-to', String(to));
    await page.click('#replay-form button[type="submit"]');
    await confirm(new RegExp(`events ${from} to ${to} matching subscription ${subscription.id.slice(0, 8)} .*new webhook-ids`));
    const shown = await status(/replayed/);
    const m = shown.match(/^3 events replayed \(replay ([0-9a-f]+)\)\.$/);
    assert.ok(m, shown);

    // Through the API: three new deliveries carrying the replay's audit
    // event as replayOf, delivered with webhook-ids of their own.
    const [replayed] = await auditEvents('webhook.events.replayed');
    assert.ok(replayed, 'the replay is audited');
    assert.ok(replayed.id.startsWith(m[1]), `${replayed.id} is shown as ${m[1]}`);
    let replays;
    await until(async () => {
      replays = (await deliveries()).filter((d) => d.replayOf);
      return (replays.length === 3 && replays.every((d) => d.state === 'DELIVERED')) || replays.map((d) => d.state);
    }, 'three replayed deliveries DELIVERED');
    assert.ok(replays.every((d) => d.replayOf === replayed.id));
    assert.deepEqual(replays.map((d) => d.eventSequence).sort(), originals.map((d) => d.eventSequence).sort());
    const originalIds = new Set(originals.map((d) => d.idempotencyKey));
    assert.ok(replays.every((d) => !originalIds.has(d.idempotencyKey)), 'new webhook-ids');

    // In the page: the replayed deliveries, DELIVERED, say so.
    for (const d of replays) {
      const row = page.locator(`#delivery-rows tr[data-delivery-id="${d.id}"][data-state="DELIVERED"]`);
      await row.waitFor({ timeout: DELIVERY_MS });
      await row.locator('summary').click();
      assert.match(await row.innerText(), new RegExp(`replay ${m[1]}`));
    }
    // At the receiver: one request per replayed delivery, under its id.
    for (const d of replays) {
      assert.deepEqual(received.filter((r) => r.id === d.idempotencyKey).map((r) => r.status), [200]);
    }
    await screenshot(page, 'webhooks-replayed');
    assert.deepEqual(page.problems, []);
  });
});
