package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

const verificationSubscription = `subscription($p: ID!, $from: Uint64, $to: Uint64, $r: String) {
  auditChainVerification(projectId: $p, fromSequence: $from, toSequence: $to, resumeToken: $r) {
    valid complete resumeToken checkedCount sequenceReached firstInvalidSequence headSequence eventsPerSecond
  }
}`

// verificationItem is an item of auditChainVerification.
type verificationItem struct {
	Valid                bool    `json:"valid"`
	Complete             bool    `json:"complete"`
	ResumeToken          *string `json:"resumeToken"`
	CheckedCount         string  `json:"checkedCount"`
	SequenceReached      string  `json:"sequenceReached"`
	FirstInvalidSequence *string `json:"firstInvalidSequence"`
	HeadSequence         string  `json:"headSequence"`
	EventsPerSecond      float64 `json:"eventsPerSecond"`
}

// openVerification starts auditChainVerification over graphql-sse (vars
// added to projectA's); cancel drops the connection.
func (b *testBundle) openVerification(t *testing.T, token string, vars map[string]any) (s *liveStream, cancel context.CancelFunc) {
	t.Helper()
	all := map[string]any{"p": projectA}
	for k, v := range vars {
		all[k] = v
	}
	req, cancel := b.graphqlSSERequest(t, token, verificationSubscription, all)
	s = startLiveStream(t, req)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	return s, cancel
}

// nextItem reads the stream's next item; with errors, it returns their
// first code instead.
func nextItem(t *testing.T, s *liveStream) (verificationItem, string) {
	t.Helper()
	f, ok := s.next()
	require.True(t, ok, "the stream ended")
	require.Equal(t, "next", f.event, "%+v", f)
	var msg struct {
		Data struct {
			AuditChainVerification verificationItem `json:"auditChainVerification"`
		} `json:"data"`
		Errors []gqlError `json:"errors"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.data), &msg), f.data)
	if len(msg.Errors) > 0 {
		code, _ := msg.Errors[0].Extensions["code"].(string)
		return verificationItem{}, code
	}
	return msg.Data.AuditChainVerification, ""
}

// verificationItems reads a stream's items to its "complete" event.
func verificationItems(t *testing.T, s *liveStream) []verificationItem {
	t.Helper()
	var out []verificationItem
	for {
		v, code := nextItem(t, s)
		require.Empty(t, code)
		out = append(out, v)
		if v.Complete {
			f, ok := s.next()
			require.True(t, ok)
			require.Equal(t, "complete", f.event)
			return out
		}
		require.False(t, v.Valid)
		require.NotNil(t, v.ResumeToken)
	}
}

// verificationError reads the stream's error, and its end.
func verificationError(t *testing.T, s *liveStream) string {
	t.Helper()
	_, code := nextItem(t, s)
	require.NotEmpty(t, code)
	return code
}

func reachedOf(vs []verificationItem) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.SequenceReached)
	}
	return out
}

// verifyLimits verify 1,200 events per step, whatever the time.
var verifyLimits = app.VerifyLimits{MaxEvents: 1200, MaxDuration: time.Hour, ProgressInterval: time.Hour}

// tamperEvent rewrites a stored event behind the append-only trigger's
// back, as an attacker with database access would.
func (b *testBundle) tamperEvent(t *testing.T, seq int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "ALTER TABLE audit_events DISABLE TRIGGER USER"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE audit_events SET outcome = 'FAILURE' WHERE tenant_id = $1 AND project_id = $2 AND sequence = $3", tenantA, projectA, seq); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "ALTER TABLE audit_events ENABLE TRIGGER USER")
		return err
	}))
}

// TestAuditChainVerificationSubscription verifies, over graphql-sse, a
// project longer than one step (1,200 events) in one subscription:
// progress items, then the verdict; a dropped connection resumes from a
// progress item's token; tampering is found mid-stream; another tenant's
// project looks missing; bad input is the query's error.
func TestAuditChainVerificationSubscription(t *testing.T) {
	t.Parallel()
	b := setupApp(t, app.Config{Verify: verifyLimits}, nil)
	tok := b.token(t, tokenOpts{})
	for range 3 {
		b.recordN(t, tok, 1000, "device.updated")
	}

	s, _ := b.openVerification(t, tok, nil)
	vs := verificationItems(t, s)
	require.Equal(t, []string{"1200", "2400", "3000"}, reachedOf(vs))
	require.True(t, vs[2].Valid)
	require.Equal(t, "3000", vs[2].CheckedCount)
	require.Equal(t, "3000", vs[2].HeadSequence)
	require.Nil(t, vs[2].ResumeToken)
	require.Positive(t, vs[2].EventsPerSecond)

	// The connection drops after the first item; a new one resumes.
	s, drop := b.openVerification(t, tok, nil)
	first, code := nextItem(t, s)
	require.Empty(t, code)
	drop()
	s, _ = b.openVerification(t, tok, map[string]any{"r": *first.ResumeToken})
	vs = verificationItems(t, s)
	require.Equal(t, []string{"2400", "3000"}, reachedOf(vs))
	require.True(t, vs[1].Valid)
	require.Equal(t, "3000", vs[1].CheckedCount)

	// Bad input, as the query answers it.
	s, _ = b.openVerification(t, tok, map[string]any{"from": "5", "to": "4"})
	require.Equal(t, "BAD_USER_INPUT", verificationError(t, s))
	s, _ = b.openVerification(t, tok, map[string]any{"from": "1", "r": *first.ResumeToken})
	require.Equal(t, "BAD_USER_INPUT", verificationError(t, s))
	s, _ = b.openVerification(t, tok, map[string]any{"r": "bm90LWEtdG9rZW4"})
	require.Equal(t, "BAD_USER_INPUT", verificationError(t, s))
	s, _ = b.openVerification(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite}}), nil)
	require.Equal(t, "FORBIDDEN", verificationError(t, s))

	// Another tenant's project of the same name is its own, empty one;
	// a project outside the token is refused as the query refuses it.
	s, _ = b.openVerification(t, b.token(t, tokenOpts{tenant: tenantB}), nil)
	vs = verificationItems(t, s)
	require.Len(t, vs, 1)
	require.True(t, vs[0].Valid)
	require.Equal(t, "0", vs[0].CheckedCount)
	require.Equal(t, "0", vs[0].HeadSequence)
	outside := b.token(t, tokenOpts{projects: []string{projectB}})
	query := b.graphql(t, outside, `query($p: ID!) { verifyAuditChain(projectId: $p) { valid } }`, map[string]any{"p": projectA})
	s, _ = b.openVerification(t, outside, nil)
	require.Equal(t, query.code(t), verificationError(t, s))

	// Tampering past the first step: the stream's verdict names it.
	b.tamperEvent(t, 1500)
	s, _ = b.openVerification(t, tok, nil)
	vs = verificationItems(t, s)
	require.Len(t, vs, 2)
	require.False(t, vs[1].Valid)
	require.Equal(t, "1500", *vs[1].FirstInvalidSequence)
	require.Equal(t, "1499", vs[1].CheckedCount)
}

// lockAuditEvents holds an exclusive lock on audit_events until the
// returned func releases it: a verification reading events waits on it.
func (b *testBundle) lockAuditEvents(t *testing.T) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	release = func() { _ = tx.Rollback(ctx) }
	t.Cleanup(release)
	return release
}

// requireWaitingReads waits until n queries of the database wait on a lock.
func (b *testBundle) requireWaitingReads(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		return waiting == n
	}, 30*time.Second, 10*time.Millisecond, "%d queries waiting on the lock", n)
}

// TestAuditChainVerificationLimitsAndCancel: while a verification runs
// (its read held by a lock), another of the tenant is QUOTA_EXCEEDED; the
// client going away stops the running read at once (the lock still held)
// and frees the slot.
func TestAuditChainVerificationLimitsAndCancel(t *testing.T) {
	t.Parallel()
	limits := verifyLimits
	limits.StreamsPerTenant = 1
	b := setupApp(t, app.Config{Verify: limits}, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 10, "device.updated")

	unlock := b.lockAuditEvents(t)
	_, drop := b.openVerification(t, tok, nil)
	b.requireWaitingReads(t, 1)
	s, _ := b.openVerification(t, tok, nil)
	require.Equal(t, "QUOTA_EXCEEDED", verificationError(t, s))

	drop()
	b.requireWaitingReads(t, 0)
	reader := app.Identity{TenantID: tenantA, Subject: "tester", ProjectIDs: []string{projectA}, Permissions: []app.Permission{app.PermissionAuditRead}}
	require.Eventually(t, func() bool {
		v, err := b.app.StreamAuditChainVerification(context.Background(), reader, app.VerifyAuditChainInput{ProjectID: projectA})
		if err != nil {
			require.Equal(t, app.CodeQuotaExceeded, app.ErrorOf(err).Code)
			return false
		}
		v.Close()
		return true
	}, 30*time.Second, 10*time.Millisecond, "the slot is freed")

	s, _ = b.openVerification(t, tok, nil)
	b.requireWaitingReads(t, 1)
	unlock()
	vs := verificationItems(t, s)
	require.True(t, vs[len(vs)-1].Valid)
	require.Equal(t, "10", vs[len(vs)-1].CheckedCount)
}

// TestAuditChainVerificationPerConnection: a WebSocket connection runs at
// most StreamsPerConnection verifications; another connection of the same
// identity has its own.
func TestAuditChainVerificationPerConnection(t *testing.T) {
	t.Parallel()
	limits := verifyLimits
	limits.StreamsPerConnection = 1
	b := setupApp(t, app.Config{Verify: limits}, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 10, "device.updated")
	subscribe := func(c *wsClient, id string) {
		c.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{
			"query": verificationSubscription, "variables": map[string]any{"p": projectA}}})
	}

	unlock := b.lockAuditEvents(t)
	c1, c2 := b.dialWS(t, tok), b.dialWS(t, tok)
	subscribe(c1, "1")
	b.requireWaitingReads(t, 1)
	subscribe(c1, "2")
	c1.requireOperationError("2", "QUOTA_EXCEEDED")
	subscribe(c2, "3")
	b.requireWaitingReads(t, 2)

	// Completing the first operation stops its read at once.
	c1.send(map[string]any{"id": "1", "type": "complete"})
	b.requireWaitingReads(t, 1)
	unlock()
	requireVerified := func(c *wsClient, id string) {
		t.Helper()
		for {
			msg := c.read()
			require.Equal(t, id, msg["id"], "%v", msg)
			if msg["type"] == "complete" {
				return
			}
			require.Equal(t, "next", msg["type"], "%v", msg)
			require.Contains(t, mustJSON(t, msg["payload"]), `"valid":true`)
		}
	}
	requireVerified(c2, "3")
	// The first connection's slot came back with its operation's end.
	subscribe(c1, "4")
	requireVerified(c1, "4")
}
