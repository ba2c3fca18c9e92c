// End-to-end test of GraphQL over WebSocket, driven by the reference
// graphql-ws client (graphql-transport-ws subprotocol) with the `ws`
// WebSocket implementation, against a real `aether serve` process.
//
// Run with `make e2e` (it builds bin/aether and sets AETHER_BIN). With
// DATABASE_URL set the server uses that database, and the tests use a
// tenant of their own so that sequences start at 1; otherwise the server
// runs its embedded PostgreSQL in a fresh temporary data dir.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

import {
  AetherServer,
  SinkRecorder,
  deferred,
  describeError,
  withDeadline,
  eventInputs,
  AUDIT_SUBSCRIPTION,
  seqs,
} from './harness.mjs';

const PROJECT = 'plant-1';
const OTHER_PROJECT = 'plant-2';
// Sequences are per tenant and project: a shared database gets a fresh tenant.
const TENANT = process.env.DATABASE_URL ? `acme-e2e-${randomBytes(6).toString('hex')}` : 'acme';

/** n valid RecordAuditEventInput values for the project. */
const events = (n, action) => eventInputs(PROJECT, n, action);

describe('GraphQL over WebSocket with the graphql-ws client', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  const clients = [];

  /**
   * A graphql-ws client for the server; closes are recorded in
   * client.closes (and the first one resolves client.closed).
   */
  function newClient(authToken = token) {
    const closed = deferred();
    const closes = [];
    const client = createClient({
      url: server.wsURL,
      webSocketImpl: WebSocket,
      connectionParams: { Authorization: `Bearer ${authToken}` },
      retryAttempts: 0,
      on: {
        closed: (event) => {
          closes.push(event);
          closed.resolve(event);
        },
      },
    });
    clients.push(client);
    return Object.assign(client, { closes, closed: closed.promise });
  }

  /** Subscribes client to auditEventRecorded; returns the sink's recorder and the unsubscribe function. */
  function subscribeEvents(client, name, variables) {
    const rec = new SinkRecorder(name);
    const unsubscribe = client.subscribe({ query: AUDIT_SUBSCRIPTION, variables }, rec.sink);
    return { rec, unsubscribe };
  }

  /** Fails on an error, a completion, or a payload that is not one event. */
  function assertHealthyStream(rec) {
    assert.equal(rec.error, undefined, `${rec.name}: unexpected error ${JSON.stringify(describeError(rec.error))}`);
    assert.equal(rec.completed, false, `${rec.name}: completed unexpectedly`);
    for (const p of rec.payloads) {
      assert.equal(p.errors, undefined, `${rec.name}: payload with errors ${JSON.stringify(p)}`);
      assert.match(String(p.data?.auditEventRecorded?.sequence), /^[1-9][0-9]*$/, `${rec.name}: bad payload ${JSON.stringify(p)}`);
    }
  }

  /** Awaits at least n events, then requires the sequences to be exactly want. */
  async function expectSequences(rec, want) {
    await rec.until((r) => r.ended || r.payloads.length >= want.length, `${want.length} events`);
    assertHealthyStream(rec);
    assert.deepEqual(rec.sequences, want, `${rec.name}: sequences`);
  }

  before(async () => {
    server = await AetherServer.start();
    token = await server.token({ tenant: TENANT, projects: [PROJECT] });
  }, { timeout: 150_000 });

  after(async () => {
    await Promise.allSettled(clients.map((c) => c.dispose()));
    if (server) await server.stop();
  }, { timeout: 60_000 });

  // The first subscription lives on into the resume test, to show that it
  // receives the later event 9 too and nothing twice in between.
  let first;

  test('replays from afterSequence 0, then delivers live events: exactly 1..8 in order', async () => {
    const recorded = await server.record(token, events(3));
    assert.deepEqual(recorded.map((e) => e.sequence), seqs(1, 3), 'sequences of the first batch');

    const client = newClient();
    first = subscribeEvents(client, 'after-0', { p: PROJECT, after: '0' });
    await expectSequences(first.rec, seqs(1, 3));

    // Five more while subscribed, as concurrent one-event batches: the
    // store orders them; the subscription must still deliver them in
    // sequence order.
    const more = await Promise.all(Array.from({ length: 5 }, () => server.record(token, events(1, 'device.config.changed'))));
    assert.deepEqual(more.flat().map((e) => e.sequence).sort((a, b) => a - b), seqs(4, 8), 'sequences of the live events');

    await expectSequences(first.rec, seqs(1, 8));
    assert.deepEqual(
      first.rec.payloads.map((p) => p.data.auditEventRecorded.action),
      [...Array(3).fill('device.firmware.updated'), ...Array(5).fill('device.config.changed')],
      'actions',
    );
  });

  test('a second client resumes after 5: 6..8 replayed, then the new 9', async () => {
    assert.ok(first, 'needs the first test');
    const client = newClient();
    const { rec, unsubscribe } = subscribeEvents(client, 'after-5', { p: PROJECT, after: '5' });
    await expectSequences(rec, seqs(6, 8));

    const [nine] = await server.record(token, events(1, 'device.rebooted'));
    assert.equal(nine.sequence, '9');
    await expectSequences(rec, seqs(6, 9));
    assert.equal(rec.payloads[3].data.auditEventRecorded.action, 'device.rebooted');

    // The first subscription got 9 too, with nothing twice since 8.
    await expectSequences(first.rec, seqs(1, 9));

    unsubscribe();
    first.unsubscribe();
    // A completed subscription's sink completes on the client side.
    await rec.until((r) => r.completed, 'complete after unsubscribe');
    assert.equal(rec.error, undefined);
  });

  test('a wrong token closes the connection with 4403', async (t) => {
    const [header, payload, signature] = token.split('.');
    // Same claims, other signature; and not a JWT at all.
    const forged = `${header}.${payload}.${signature.slice(0, -4)}${signature.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    for (const [name, bad] of [['forged signature', forged], ['not a JWT', 'not-a-token']]) {
      await t.test(name, async () => {
        const client = newClient(bad);
        const { rec } = subscribeEvents(client, `bad token: ${name}`, { p: PROJECT, after: '0' });
        const closed = await withDeadline(client.closed, 'the closed event');
        assert.equal(closed.code, 4403, `close code (reason ${JSON.stringify(closed.reason)})`);
        await rec.until((r) => r.ended, 'the sink to end');
        assert.deepEqual(rec.payloads, [], 'no data before the close');
        assert.equal(rec.completed, false, 'the sink gets an error, not a completion');
        assert.equal(rec.error?.code, 4403, `sink error ${JSON.stringify(describeError(rec.error))}`);
        assert.equal(client.closes.length, 1, 'one close, no retry');
      });
    }
  });

  test('a project outside the token is NOT_FOUND', async (t) => {
    const client = newClient();
    const { rec } = subscribeEvents(client, 'other project', { p: OTHER_PROJECT, after: '0' });
    await rec.until((r) => r.ended, 'the operation to end');

    // graphql-ws servers report an error creating the source stream as a
    // next carrying the errors followed by complete; an error message
    // (sink.error with the GraphQL errors) is accepted too.
    const errors = Array.isArray(rec.error) ? rec.error : rec.payloads.flatMap((p) => p.errors ?? []);
    assert.ok(errors.length > 0, `GraphQL errors expected; received ${rec.describe()}`);
    assert.ok(
      errors.every((e) => e.extensions?.code === 'NOT_FOUND'),
      `every error is NOT_FOUND; received ${rec.describe()}`,
    );
    assert.ok(
      rec.payloads.every((p) => p.data == null),
      `no data for another project; received ${rec.describe()}`,
    );
    assert.ok(rec.error === undefined || Array.isArray(rec.error), `an operation error, not a socket error: ${rec.describe()}`);
    t.diagnostic(`delivered as ${Array.isArray(rec.error) ? 'an error message' : 'next (with errors) + complete'}: ${rec.describe()}`);
    // The operation failed, the connection did not: the only close allowed
    // is the lazy client's own 1000 once it has no operation left.
    assert.ok(client.closes.every((e) => e.code === 1000), `closes: ${JSON.stringify(client.closes.map(describeError))}`);
  });

  test('a query over the WebSocket returns data', async () => {
    const client = newClient();
    const rec = new SinkRecorder('query');
    client.subscribe({ query: `{ auditEvents(projectId: "${PROJECT}", first: 2) { edges { node { sequence } } } }` }, rec.sink);
    await rec.until((r) => r.ended, 'the query to complete');
    assert.equal(rec.error, undefined, `unexpected error ${rec.describe()}`);
    assert.deepEqual(rec.payloads, [{ data: { auditEvents: { edges: [{ node: { sequence: '1' } }, { node: { sequence: '2' } }] } } }]);
    assert.equal(rec.completed, true);
  });
});
