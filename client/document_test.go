package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
)

// TestDocumentsAndSSE runs documents the typed methods do not cover
// (Query, Mutate) and a subscription over graphql-sse (SubscribeSSE)
// against the real server: data decoded, errors as *Error with their code,
// and the events' data as the server wrote it, in order.
func TestDocumentsAndSSE(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// From sequence 0: the stream answers once its headers are out, which
	// can be before the server's subscription is registered; a stream
	// without afterSequence would miss an event recorded in between.
	stream, err := b.client.SubscribeSSE(ctx, `subscription($p: ID!, $after: Uint64) { auditEventRecorded(projectId: $p, afterSequence: $after) { sequence action } }`,
		map[string]any{"p": "sse", "after": "0"})
	require.NoError(t, err)
	defer stream.Close()

	var rec struct {
		RecordAuditEvent struct{ Event struct{ ID, Sequence string } }
	}
	in := event("sse", "dev-1")
	require.NoError(t, b.client.Mutate(ctx, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { id sequence } } }`,
		map[string]any{"in": in}, &rec))
	require.Equal(t, "1", rec.RecordAuditEvent.Event.Sequence)

	var got struct {
		AuditEvent struct{ ID, Action string }
	}
	require.NoError(t, b.client.Query(ctx, `query($p: ID!, $id: ID!) { auditEvent(projectId: $p, id: $id) { id action } }`,
		map[string]any{"p": "sse", "id": rec.RecordAuditEvent.Event.ID}, &got))
	require.Equal(t, rec.RecordAuditEvent.Event.ID, got.AuditEvent.ID)
	require.Equal(t, "device.firmware.updated", got.AuditEvent.Action)

	data, err := stream.Next()
	require.NoError(t, err)
	require.JSONEq(t, `{"auditEventRecorded":{"sequence":"1","action":"device.firmware.updated"}}`, string(data))

	// The server's errors, with their codes.
	err = b.client.Query(ctx, `{ noSuchField }`, nil, &json.RawMessage{})
	var e *client.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, client.CodeBadUserInput, e.Code)
	// A refused subscription: refused at once, or by its first event.
	bad, err := b.client.SubscribeSSE(ctx, `subscription { noSuchField }`, nil)
	if err == nil {
		defer bad.Close()
		_, err = bad.Next()
	}
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, client.CodeBadUserInput, e.Code)
}

// TestSSEStreamOutlivesTheHTTPClientTimeout: a subscription over SSE
// keeps delivering after the HTTP client's Timeout has passed (it bounds
// whole exchanges, which would cut every stream after it; the default is
// 60 s): here a client whose Timeout is 300 ms still receives an event
// recorded a second after the stream started.
func TestSSEStreamOutlivesTheHTTPClientTimeout(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	short, err := client.New(b.srv.URL, client.Options{Token: b.token, HTTPClient: &http.Client{Timeout: 300 * time.Millisecond}})
	require.NoError(t, err)
	stream, err := short.SubscribeSSE(ctx, `subscription($p: ID!) { auditEventRecorded(projectId: $p) { sequence } }`,
		map[string]any{"p": "sse-long"})
	require.NoError(t, err)
	defer stream.Close()

	// Not a wait for a condition: the stream must outlive the client's
	// Timeout (three times over) before the event exists.
	time.Sleep(time.Second)
	_, err = b.client.Record(ctx, event("sse-long", "dev-1"))
	require.NoError(t, err)
	data, err := stream.Next()
	require.NoError(t, err)
	require.JSONEq(t, `{"auditEventRecorded":{"sequence":"1"}}`, string(data))
}
