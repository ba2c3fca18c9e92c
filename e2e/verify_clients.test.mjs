// The auditChainVerification subscription from Node with the reference
// clients, graphql-sse (Server-Sent Events, distinct connections) and
// graphql-ws (graphql-transport-ws over the `ws` WebSocket), against a real
// `aether serve` whose verification steps are 100 events
// (AETHER_VERIFY_STEP_EVENTS): each client gets a progress item per step
// (not complete, with a resumeToken, checkedCount and sequenceReached so
// far, eventsPerSecond), then the verdict, then completion; a progress
// item's resumeToken continues the verification in a new subscription.
//
// Run with `make e2e` (it builds bin/aether and sets AETHER_BIN).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { createClient as createSSEClient } from 'graphql-sse';
import { createClient as createWSClient } from 'graphql-ws';
import WebSocket from 'ws';

import { AetherServer, SinkRecorder, eventInputs } from './harness.mjs';

const PROJECT = 'plant-1';
const TENANT = process.env.DATABASE_URL ? `verify-clients-${randomBytes(6).toString('hex')}` : 'verify-clients';
const EVENTS = 250;

const VERIFY = `subscription Verify($p: ID!, $resume: String) {
  auditChainVerification(projectId: $p, resumeToken: $resume) {
    valid complete resumeToken checkedCount sequenceReached eventsPerSecond firstInvalidSequence headSequence
  }
}`;

/** The verification items a recorder received. */
const items = (rec) => rec.payloads.map((p) => p?.data?.auditChainVerification);

describe('auditChainVerification with the graphql-sse and graphql-ws clients', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  const disposers = [];

  before(async () => {
    server = await AetherServer.start({ env: { AETHER_VERIFY_STEP_EVENTS: '100' } });
    token = await server.token({ tenant: TENANT, projects: [PROJECT] });
    for (let left = EVENTS; left > 0; left -= 50) await server.record(token, eventInputs(PROJECT, Math.min(50, left)));
  }, { timeout: 150_000 });

  after(async () => {
    for (const dispose of disposers) await dispose();
    if (server) await server.stop();
  }, { timeout: 60_000 });

  const clients = {
    'graphql-sse': () => {
      const client = createSSEClient({ url: server.graphqlURL, headers: { Authorization: `Bearer ${token}` }, retryAttempts: 0 });
      disposers.push(() => client.dispose());
      return client;
    },
    'graphql-ws': () => {
      const client = createWSClient({
        url: server.wsURL,
        webSocketImpl: WebSocket,
        connectionParams: { Authorization: `Bearer ${token}` },
        retryAttempts: 0,
      });
      disposers.push(() => client.dispose());
      return client;
    },
  };

  /** Runs one verification with client to its completion; returns its items. */
  async function run(client, name, variables) {
    const rec = new SinkRecorder(name);
    client.subscribe({ query: VERIFY, variables }, rec.sink);
    await rec.until((r) => r.ended, 'the verdict and completion');
    assert.equal(rec.error, undefined, rec.describe());
    for (const p of rec.payloads) assert.equal(p.errors, undefined, JSON.stringify(p.errors));
    return items(rec);
  }

  for (const [name, make] of Object.entries(clients)) {
    test(`${name}: progress items, the verdict, and a resume from a progress item`, async () => {
      const client = make();
      const vs = await run(client, name, { p: PROJECT });
      assert.deepEqual(vs.map((v) => v.sequenceReached), ['100', '200', '250']);
      assert.deepEqual(vs.map((v) => v.complete), [false, false, true]);
      for (const v of vs.slice(0, 2)) {
        assert.equal(v.valid, false, 'a progress item has no verdict yet');
        assert.equal(typeof v.resumeToken, 'string');
        assert.equal(v.checkedCount, v.sequenceReached);
        assert.equal(typeof v.eventsPerSecond, 'number');
        assert.equal(v.headSequence, String(EVENTS));
      }
      const verdict = vs[2];
      assert.equal(verdict.valid, true);
      assert.equal(verdict.checkedCount, String(EVENTS));
      assert.equal(verdict.firstInvalidSequence, null);
      assert.equal(verdict.resumeToken, null);
      assert.ok(verdict.eventsPerSecond > 0);

      const resumed = await run(client, `${name} resumed`, { p: PROJECT, resume: vs[0].resumeToken });
      assert.deepEqual(resumed.map((v) => v.sequenceReached), ['200', '250']);
      assert.equal(resumed.at(-1).valid, true);
      assert.equal(resumed.at(-1).checkedCount, String(EVENTS), 'the count goes on from the token');
    });
  }
});
