// End-to-end tests of the GraphiQL IDE (/graphiql) in headless Chromium
// (Debian's chromium, driven by playwright-core), against a real
// `aether serve`: the sign-in from the URL fragment, a query, a mutation and
// an auditEventRecorded subscription over graphql-ws run from the editor,
// the schema's docs, the sign-in form, and the link from the dashboard. Any
// page error, console error or Content-Security-Policy violation fails.
// Screenshots go to e2e/artifacts/ (git-ignored).
//
// Run with `make e2e` (all e2e files), or only this file:
//   make build && cd e2e && AETHER_BIN=../bin/aether node --test graphiql.test.mjs

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { launchChromium, screenshot } from './browser.mjs';
import { AetherServer, WAIT_MS, eventInputs } from './harness.mjs';

const PROJECT = 'plant-1';
// Sequences are per tenant and project: a shared database gets a fresh tenant.
const TENANT = process.env.DATABASE_URL ? `acme-giql-${randomBytes(6).toString('hex')}` : 'acme';

/**
 * Opens a page that records what must never happen: page errors, console
 * errors (Chromium reports CSP refusals there too) and CSP violation events.
 */
async function newWatchedPage(context) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  await page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (ev) => {
      window.cspViolations.push(`${ev.violatedDirective}: ${ev.blockedURI || 'inline'} (${ev.sourceFile}:${ev.lineNumber})`);
    });
  });
  return Object.assign(page, { problems });
}

/** Fails on any problem the page recorded; `allowed` matches expected ones. */
async function assertNoProblems(page, allowed = null) {
  const violations = await page.evaluate(() => window.cspViolations);
  assert.deepEqual(violations, [], 'no Content-Security-Policy violation');
  assert.deepEqual(page.problems.filter((p) => !allowed || !allowed.test(p)), [], 'no page or console error');
}

/** Waits for the IDE, its schema loaded (the docs button works from then on). */
async function waitForIDE(page) {
  await page.locator('.graphiql-query-editor .CodeMirror').waitFor({ timeout: WAIT_MS });
  await page.locator('button[aria-label="Re-fetch GraphQL schema"]:not([disabled])').waitFor({ timeout: WAIT_MS });
}

/**
 * Replaces the query editor's text as a paste would, waits until GraphiQL
 * has parsed it (the tab takes the operation's name; it does so 100 ms after
 * the last edit), and runs it with Ctrl-Enter.
 */
async function runOperation(page, text) {
  const name = text.match(/^(?:query|mutation|subscription) (\w+)/)[1];
  await page.locator('.graphiql-query-editor .CodeMirror').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.insertText(text);
  await page.keyboard.press('Escape'); // closes a completion hint, if any
  await page.locator(`#graphiql-session-tab-0[title="${name}"]`).waitFor({ timeout: WAIT_MS });
  await page.keyboard.press('Control+Enter');
}

/** The response pane's text. */
function responseText(page) {
  return page.evaluate(() => document.querySelector('.graphiql-response .CodeMirror')?.CodeMirror.getValue() ?? '');
}

/** Polls the response pane until it matches re, or fails with what it held. */
async function waitForResponse(page, re, timeout = WAIT_MS) {
  const deadline = Date.now() + timeout;
  let text = '';
  while (Date.now() < deadline) {
    text = await responseText(page);
    if (re.test(text)) return text;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`the response pane did not match ${re} within ${timeout} ms; it holds:\n${text}`);
}

describe('graphiql: sign-in, query, mutation, subscription, docs, dashboard link', { timeout: 240_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  let browser;
  let page;

  before(async () => {
    server = await AetherServer.start();
    token = await server.token({ tenant: TENANT, projects: [PROJECT], permissions: 'audit:read,audit:write' });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('serves the page with a per-response style nonce and no unsafe directives', async () => {
    const a = await fetch(`${server.httpURL}/graphiql`);
    const b = await fetch(`${server.httpURL}/graphiql`);
    assert.equal(a.status, 200);
    const csp = a.headers.get('content-security-policy');
    assert.match(csp, /script-src 'self';/);
    assert.match(csp, /style-src 'self' 'nonce-[A-Za-z0-9_-]{22}';/);
    assert.doesNotMatch(csp, /unsafe-/);
    assert.notEqual(csp, b.headers.get('content-security-policy'), 'a fresh nonce per response');
    const nonce = csp.match(/'nonce-([^']+)'/)[1];
    assert.ok((await a.text()).includes(`<meta property="csp-nonce" nonce="${nonce}">`));
    await b.arrayBuffer();
  });

  test('opens signed in from #token=…, and the token leaves the address bar and history', async () => {
    page = await newWatchedPage(browser.context);
    await page.goto(`${server.httpURL}/graphiql#token=${token}&project=${PROJECT}`);
    await waitForIDE(page);
    assert.equal(page.url(), `${server.httpURL}/graphiql`, 'the fragment with the token is gone');
    const cdp = await browser.context.newCDPSession(page);
    const { entries } = await cdp.send('Page.getNavigationHistory');
    await cdp.detach();
    assert.ok(!entries.some((e) => e.url.includes(token)), 'no history entry keeps the token');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('aether.graphiql.token')), token);
    // The example operations name the project of the link.
    const editor = await page.evaluate(() => document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.getValue());
    assert.match(editor, /auditEvents\(projectId: "plant-1"/);
    await assertNoProblems(page);
  });

  test('runs a query typed in the editor and shows its result', async () => {
    const [ev] = await server.record(token, eventInputs(PROJECT, 1, 'device.graphiql.queried'));
    await runOperation(page, `query Recent {\n  auditEvents(projectId: "${PROJECT}", first: 5, order: NEWEST_FIRST) {\n    edges { node { sequence action } }\n  }\n}\n`);
    const text = await waitForResponse(page, /device\.graphiql\.queried/);
    const body = JSON.parse(text);
    assert.deepEqual(body.data.auditEvents.edges[0].node, { sequence: ev.sequence, action: 'device.graphiql.queried' });
    await screenshot(page, 'graphiql-query');
    await assertNoProblems(page);
  });

  test('runs a mutation', async () => {
    await runOperation(
      page,
      `mutation Record {\n  recordAuditEvent(input: {projectId: "${PROJECT}", action: "device.graphiql.recorded", occurredAt: "${new Date().toISOString()}",` +
        ` subject: {type: USER, id: "e2e"}, resource: {type: "ide", id: "graphiql"}, outcome: SUCCESS}) { event { sequence action } }\n}\n`,
    );
    const body = JSON.parse(await waitForResponse(page, /device\.graphiql\.recorded/));
    const { sequence } = body.data.recordAuditEvent.event;
    const check = await server.graphql(token, `query($p: ID!) { auditEvents(projectId: $p, first: 1, order: NEWEST_FIRST) { edges { node { sequence action } } } }`, { p: PROJECT });
    assert.deepEqual(check.body.data.auditEvents.edges[0].node, { sequence, action: 'device.graphiql.recorded' });
    await assertNoProblems(page);
  });

  test('starts an auditEventRecorded subscription over graphql-ws and shows events as they are recorded', async () => {
    const check = await server.graphql(token, `query($p: ID!) { auditEvents(projectId: $p, first: 1, order: NEWEST_FIRST) { edges { node { sequence } } } }`, { p: PROJECT });
    const last = check.body.data.auditEvents.edges[0].node.sequence;
    // afterSequence: the subscription starts at a known point, so an event
    // recorded before the server has set it up is replayed, not missed.
    await runOperation(page, `subscription Live {\n  auditEventRecorded(projectId: "${PROJECT}", afterSequence: "${last}") {\n    sequence action\n  }\n}\n`);
    await page.locator('button[aria-label="Stop query (Ctrl-Enter)"]').waitFor({ timeout: WAIT_MS });

    const [first] = await server.record(token, eventInputs(PROJECT, 1, 'device.graphiql.live'));
    await waitForResponse(page, new RegExp(`"sequence": "${first.sequence}"`));
    // The subscription is running now: the next event arrives live.
    const [second] = await server.record(token, eventInputs(PROJECT, 1, 'device.graphiql.live'));
    const text = await waitForResponse(page, new RegExp(`"sequence": "${second.sequence}"`));
    assert.deepEqual(JSON.parse(text), { data: { auditEventRecorded: { sequence: second.sequence, action: 'device.graphiql.live' } } });
    await screenshot(page, 'graphiql-subscription');

    await page.locator('button[aria-label="Stop query (Ctrl-Enter)"]').click();
    await page.locator('button[aria-label="Execute query (Ctrl-Enter)"]').waitFor({ timeout: WAIT_MS });
    await assertNoProblems(page);
  });

  test("shows the schema's docs", async () => {
    await page.locator('button[aria-label="Show Documentation Explorer"]').click();
    const docs = page.locator('.graphiql-doc-explorer');
    await docs.getByText('Query', { exact: true }).first().click();
    await docs.getByText('auditEvents', { exact: true }).first().waitFor({ timeout: WAIT_MS });
    assert.match(await docs.innerText(), /One page of a project's audit events/);
    await docs.getByText('auditEvents', { exact: true }).first().click();
    await docs.getByText('AuditEventConnection', { exact: true }).first().waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'graphiql-docs');
    await assertNoProblems(page);
  });

  test('opens dialogs whose libraries insert <style> elements, which carry the nonce', async () => {
    // Radix's dialog locks scrolling with a <style> element of its own.
    await page.locator('button[aria-label="Open settings dialog"]').click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor({ timeout: WAIT_MS });
    const styles = await page.evaluate(() => [...document.querySelectorAll('style')].map((el) => el.nonce));
    assert.ok(styles.length > 0, 'the dialog inserted a <style> element');
    assert.ok(styles.every((n) => n.length === 22), `every <style> has the nonce: ${JSON.stringify(styles)}`);
    await screenshot(page, 'graphiql-settings');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden', timeout: WAIT_MS });
    await assertNoProblems(page);
  });

  test('signs in with the form, returns to it when the token is refused, and signs out', async () => {
    const fresh = await newWatchedPage(browser.context); // a new tab: empty sessionStorage
    await fresh.goto(`${server.httpURL}/graphiql`);
    await fresh.locator('#sign-in-form').waitFor({ timeout: WAIT_MS });
    assert.equal(await fresh.locator('.graphiql-container').count(), 0);

    // A token the server refuses: the schema fetch answers 401 and the page
    // asks for a fresh one.
    await fresh.fill('#token-input', `Bearer ${token.slice(0, -4)}AAAA`);
    await fresh.click('#sign-in-form button[type="submit"]');
    await fresh.locator('#sign-in-error').waitFor({ timeout: WAIT_MS });
    assert.match(await fresh.locator('#sign-in-error').innerText(), /The server refused the token: .*Paste a fresh token\./);
    assert.equal(await fresh.evaluate(() => sessionStorage.getItem('aether.graphiql.token')), null);

    await fresh.fill('#token-input', `Bearer ${token}`);
    await fresh.fill('#project-input', PROJECT);
    await fresh.click('#sign-in-form button[type="submit"]');
    await waitForIDE(fresh);
    assert.equal(await fresh.evaluate(() => sessionStorage.getItem('aether.graphiql.token')), token);

    await fresh.click('#sign-out');
    await fresh.locator('#sign-in-form').waitFor({ timeout: WAIT_MS });
    assert.equal(await fresh.evaluate(() => sessionStorage.getItem('aether.graphiql.token')), null);
    await assertNoProblems(fresh, /status of 401/);
    await fresh.close();
  });

  test('opens from the dashboard signed in, without the token in the link', async () => {
    const dash = await newWatchedPage(browser.context);
    await dash.goto(`${server.httpURL}/dashboard#token=${token}&project=${PROJECT}`);
    const link = dash.locator('#graphiql-link');
    await link.waitFor({ timeout: WAIT_MS });
    assert.equal(await link.getAttribute('href'), '/graphiql');
    const [ide] = await Promise.all([browser.context.waitForEvent('page'), link.click()]);
    await waitForIDE(ide);
    assert.equal(ide.url(), `${server.httpURL}/graphiql`);
    assert.equal(await ide.evaluate(() => sessionStorage.getItem('aether.graphiql.token')), token);
    assert.equal(await ide.evaluate(() => sessionStorage.getItem('aether.graphiql.project')), PROJECT);
    await ide.close();
    await dash.close();
  });
});
