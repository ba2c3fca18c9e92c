// Popular GraphQL clients, each with its default headers, against a real
// `aether serve`: urql (@urql/core, whose default Accept lists
// text/event-stream after the JSON types) and graphql-request. Queries and
// mutations must come back as one JSON response in the type the client
// ranks first, never as a stream; urql's subscriptions over fetch
// (fetchSubscriptions) are graphql-sse streams. No promise may be left
// rejected unhandled (urql used to leave AbortErrors behind when a query
// was answered as a stream). The default headers of Apollo Client, Relay's
// network layer example, curl and a browser's fetch are replayed by
// TestGraphQLClientDefaultHeaders in server/graphql_media_test.go.
//
// Run with `make e2e` (it builds bin/aether and sets AETHER_BIN).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { Client, fetchExchange, gql } from '@urql/core';
import { GraphQLClient } from 'graphql-request';

import { AetherServer, SinkRecorder, eventInputs, AUDIT_SUBSCRIPTION } from './harness.mjs';

const PROJECT = 'plant-1';
const TENANT = process.env.DATABASE_URL ? `clients-${randomBytes(6).toString('hex')}` : 'clients';

const RECORD = `mutation Record($in: RecordAuditEventInput!) {
  recordAuditEvent(input: $in) { event { sequence action } }
}`;
const LIST = `query List($p: ID!) {
  auditEvents(projectId: $p, first: 50) { edges { node { sequence action } } }
}`;

/**
 * fetch that remembers the media type of every response (so that a test
 * sees what the server chose for the client's own request) and counts
 * requests.
 */
function observingFetch() {
  const seen = [];
  const fn = async (input, init) => {
    const res = await fetch(input, init);
    seen.push({ method: init?.method ?? 'GET', status: res.status, type: res.headers.get('content-type') });
    return res;
  };
  return { fn, seen };
}

describe('popular GraphQL clients with their default headers', { timeout: 300_000 }, () => {
  /** @type {AetherServer} */
  let server;
  let token;
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);

  before(async () => {
    process.on('unhandledRejection', onUnhandled);
    server = await AetherServer.start();
    token = await server.token({ tenant: TENANT, projects: [PROJECT] });
  }, { timeout: 150_000 });

  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    if (server) await server.stop();
  }, { timeout: 60_000 });

  test('urql: mutation and query as JSON, subscription as a stream, nothing left unhandled', async () => {
    const observed = observingFetch();
    const client = new Client({
      url: server.graphqlURL,
      exchanges: [fetchExchange],
      fetch: observed.fn,
      fetchOptions: () => ({ headers: { Authorization: `Bearer ${token}` } }),
      fetchSubscriptions: true,
      requestPolicy: 'network-only',
    });

    const [input] = eventInputs(PROJECT, 1, 'device.urql.recorded');
    const recorded = await client.mutation(gql(RECORD), { in: input }).toPromise();
    assert.equal(recorded.error, undefined, `mutation error: ${recorded.error}`);
    const sequence = recorded.data.recordAuditEvent.event.sequence;
    assert.equal(recorded.data.recordAuditEvent.event.action, 'device.urql.recorded');

    const listed = await client.query(gql(LIST), { p: PROJECT }).toPromise();
    assert.equal(listed.error, undefined, `query error: ${listed.error}`);
    assert.ok(listed.data.auditEvents.edges.some((e) => e.node.sequence === sequence), 'the query sees the mutation');

    assert.equal(observed.seen.length, 2, JSON.stringify(observed.seen));
    for (const r of observed.seen) {
      assert.equal(r.status, 200, JSON.stringify(r));
      assert.equal(r.type, 'application/graphql-response+json', `${r.method}: urql ranks it first`);
    }

    // A subscription over fetch is a graphql-sse stream: replay, then live.
    const rec = new SinkRecorder('urql subscription');
    const { unsubscribe } = client
      .subscription(gql(AUDIT_SUBSCRIPTION), { p: PROJECT, after: String(Number(sequence) - 1) })
      .subscribe((result) => {
        if (result.error) rec.sink.error(result.error);
        else rec.sink.next(result);
      });
    try {
      await rec.until((r) => r.ended || r.payloads.length >= 1, 'the replayed event');
      const [live] = await server.record(token, eventInputs(PROJECT, 1, 'device.urql.live'));
      await rec.until((r) => r.ended || r.payloads.length >= 2, 'the live event');
      assert.equal(rec.error, undefined, rec.describe());
      assert.deepEqual(rec.sequences, [sequence, live.sequence]);
      const stream = observed.seen.at(-1);
      assert.equal(stream.type, 'text/event-stream', JSON.stringify(observed.seen));
    } finally {
      unsubscribe();
    }
    assert.deepEqual(unhandled.map(String), [], 'unhandled rejections');
  });

  test('graphql-request: mutation and query as JSON', async () => {
    const observed = observingFetch();
    const client = new GraphQLClient(server.graphqlURL, {
      headers: { Authorization: `Bearer ${token}` },
      fetch: observed.fn,
    });
    const [input] = eventInputs(PROJECT, 1, 'device.graphql-request.recorded');
    const recorded = await client.request(RECORD, { in: input });
    const { sequence } = recorded.recordAuditEvent.event;
    const listed = await client.request(LIST, { p: PROJECT });
    assert.ok(listed.auditEvents.edges.some((e) => e.node.sequence === sequence), 'the query sees the mutation');
    assert.deepEqual(
      observed.seen.map((r) => [r.method, r.status, r.type]),
      [['POST', 200, 'application/graphql-response+json'], ['POST', 200, 'application/graphql-response+json']],
    );
    assert.deepEqual(unhandled.map(String), [], 'unhandled rejections');
  });
});
