package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/storetest"
)

// orderedRequest is one request an ordered receiver got: the event's
// sequence, its webhook-id, when it arrived and when it was answered.
type orderedRequest struct {
	seq        uint64
	webhookID  string
	status     int
	start, end time.Time
}

// orderedReceiver is a real HTTPS receiver that answers each request after
// a random delay, 500 for the event dead (always) and 200 for the others.
type orderedReceiver struct {
	srv  *httptest.Server
	dead uint64

	mu  sync.Mutex
	log []orderedRequest
}

func newOrderedReceiver(t *testing.T) *orderedReceiver {
	rc := &orderedReceiver{}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, _ := io.ReadAll(r.Body)
		var payload struct {
			Data struct{ Sequence string }
		}
		_ = json.Unmarshal(body, &payload)
		seq, _ := strconv.ParseUint(payload.Data.Sequence, 10, 64)
		time.Sleep(time.Duration(rand.N(25)) * time.Millisecond)
		rc.mu.Lock()
		code := http.StatusOK
		if seq == rc.dead {
			code = http.StatusInternalServerError
		}
		rc.mu.Unlock()
		w.WriteHeader(code)
		rc.mu.Lock()
		rc.log = append(rc.log, orderedRequest{seq: seq, webhookID: r.Header.Get("webhook-id"), status: code, start: start, end: time.Now()})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *orderedReceiver) requests() []orderedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]orderedRequest(nil), rc.log...)
}

// delivered returns the sequences answered 2xx, in the order of their first
// success.
func (rc *orderedReceiver) delivered() []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for _, r := range rc.requests() {
		if r.status == http.StatusOK && !seen[r.seq] {
			seen[r.seq] = true
			out = append(out, r.seq)
		}
	}
	return out
}

// TestOrderedDeliveryAcrossProcessesAndKill runs two `aether serve` on one
// database, delivering a SEQUENCE subscription to a receiver that answers
// after random delays. The process holding the subscription is killed
// (kill -9) mid-stream; an event that always fails is dead-lettered, pauses
// the subscription and is skipped. The receiver must see the events in
// strictly increasing order with no gap: no request for an event before
// the previous one was answered 2xx (or skipped).
func TestOrderedDeliveryAcrossProcessesAndKill(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	dbURL := storetest.NewDatabase(t)
	rc := newOrderedReceiver(t)
	caFile := filepath.Join(t.TempDir(), "receiver.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.srv.Certificate().Raw}), 0o644))

	type proc struct {
		p    *process
		base string
	}
	serve := func(name string) proc {
		addr := freeAddr(t)
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		p := start(t, []string{"DATABASE_URL=" + u.String(), "AETHER_ADDR=" + addr, "AETHER_DATA_DIR=" + dir,
			"AETHER_LOG_LEVEL=warn", "AETHER_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8", "AETHER_WEBHOOK_RETRY_SCHEDULE=100ms",
			"SSL_CERT_FILE=" + caFile}, "serve")
		awaitReady(t, p, "http://"+addr, 90*time.Second)
		return proc{p, "http://" + addr}
	}
	procs := map[string]proc{"aether-a": serve("aether-a"), "aether-b": serve("aether-b")}
	tok := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1",
		"--permissions", "audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive")
	gql := func(base, query string, vars map[string]any, out any) {
		t.Helper()
		data, errs := postGraphQL(t, base, tok, query, vars)
		require.Empty(t, errs)
		if out != nil {
			require.NoError(t, json.Unmarshal(data, out))
		}
	}
	var dest struct {
		CreateWebhookDestination struct{ Destination struct{ ID string } }
	}
	gql(procs["aether-a"].base, `mutation($in: CreateWebhookDestinationInput!) { createWebhookDestination(input: $in) { destination { id } } }`,
		map[string]any{"in": map[string]any{"projectId": "plant-1", "url": rc.srv.URL + "/hook"}}, &dest)
	var sub struct {
		CreateWebhookSubscription struct{ Subscription struct{ ID, Ordering string } }
	}
	gql(procs["aether-a"].base, `mutation($in: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $in) { subscription { id ordering } } }`,
		map[string]any{"in": map[string]any{"projectId": "plant-1", "destinationId": dest.CreateWebhookDestination.Destination.ID,
			"eventTypes": []string{"device.*"}, "ordering": "SEQUENCE"}}, &sub)
	require.Equal(t, "SEQUENCE", sub.CreateWebhookSubscription.Subscription.Ordering)

	var expected []uint64
	record := func(base string, n int) {
		t.Helper()
		events := make([]any, n)
		for i := range events {
			events[i] = map[string]any{"projectId": "plant-1", "action": "device.reading.taken",
				"occurredAt": time.Now().UTC().Format(time.RFC3339Nano), "outcome": "SUCCESS",
				"subject": map[string]any{"type": "SERVICE", "id": "meter"}, "resource": map[string]any{"type": "device", "id": "d"}}
		}
		var out struct {
			RecordAuditEvents struct{ Events []struct{ Sequence string } }
		}
		gql(base, `mutation($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { sequence } } }`,
			map[string]any{"in": map[string]any{"events": events}}, &out)
		for _, e := range out.RecordAuditEvents.Events {
			s, err := strconv.ParseUint(e.Sequence, 10, 64)
			require.NoError(t, err)
			expected = append(expected, s)
		}
	}
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "still waiting for %s; receiver has %d deliveries", what, len(rc.delivered()))
			time.Sleep(20 * time.Millisecond)
		}
	}

	// First half, then kill whichever process holds the subscription.
	for range 10 {
		record(procs["aether-a"].base, 10)
	}
	await("the first deliveries", func() bool { return len(rc.delivered()) >= 20 })
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var holder string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.granted`, uint32(0x6f726472)).Scan(&holder))
	killedAfter := len(rc.delivered())
	require.Less(t, killedAfter, 100, "the holder is killed mid-stream")
	require.NoError(t, procs[holder].p.cmd.Process.Kill()) // SIGKILL
	<-procs[holder].p.done
	delete(procs, holder)
	var survivor proc
	for _, p := range procs {
		survivor = p
	}

	// Second half, through the survivor, paced over more than the
	// lifetime of the dead job's claim (5 s); one event always fails.
	rc.mu.Lock()
	rc.dead = expected[len(expected)-1] + 30
	rc.mu.Unlock()
	for range 20 {
		record(survivor.base, 5)
		time.Sleep(350 * time.Millisecond)
	}
	require.Contains(t, expected, rc.dead)
	type subState struct {
		WebhookSubscription struct{ PausedByDeliveryID *string }
	}
	var paused subState
	await("the dead letter to pause the subscription", func() bool {
		gql(survivor.base, `query($id: ID!) { webhookSubscription(id: $id) { pausedByDeliveryId } }`,
			map[string]any{"id": sub.CreateWebhookSubscription.Subscription.ID}, &paused)
		return paused.WebhookSubscription.PausedByDeliveryID != nil
	})
	for _, r := range rc.requests() {
		require.LessOrEqual(t, r.seq, rc.dead, "nothing after the dead letter while it pauses the subscription")
	}
	skippedAt := time.Now()
	gql(survivor.base, `mutation($in: SkipWebhookDeliveryInput!) { skipWebhookDelivery(input: $in) { delivery { state } } }`,
		map[string]any{"in": map[string]any{"deliveryId": *paused.WebhookSubscription.PausedByDeliveryID, "confirm": true}}, nil)
	await("every delivery", func() bool { return len(rc.delivered()) == len(expected)-1 })

	want := make([]uint64, 0, len(expected))
	for _, s := range expected {
		if s != rc.dead {
			want = append(want, s)
		}
	}
	require.Equal(t, want, rc.delivered(), "strictly increasing, no gap, each once")
	count := map[uint64]int{}
	var again []uint64
	for _, r := range rc.requests() {
		if count[r.seq]++; count[r.seq] == 2 {
			again = append(again, r.seq)
		}
	}
	t.Logf("killed %s after %d deliveries; %d requests for %d events; events sent more than once: %v (the dead letter %d)",
		holder, killedAfter, len(rc.requests()), len(expected), again, rc.dead)
	// No request for an event before the one before it was answered 2xx
	// (or skipped): duplicates (the killed process's request in flight,
	// resent under its webhook-id) are allowed, overtaking is not.
	firstOK := map[uint64]time.Time{}
	for _, r := range rc.requests() {
		if _, ok := firstOK[r.seq]; !ok && r.status == http.StatusOK {
			firstOK[r.seq] = r.end
		}
	}
	prev := map[uint64]uint64{}
	for i := 1; i < len(expected); i++ {
		prev[expected[i]] = expected[i-1]
	}
	ids := map[uint64]string{}
	for _, r := range rc.requests() {
		if id, ok := ids[r.seq]; ok {
			require.Equal(t, id, r.webhookID, "a resend keeps its webhook-id")
		}
		ids[r.seq] = r.webhookID
		p, ok := prev[r.seq]
		if !ok {
			continue
		}
		if p == rc.dead {
			require.True(t, r.start.After(skippedAt), "event %d sent before its predecessor was skipped", r.seq)
			continue
		}
		done, ok := firstOK[p]
		require.True(t, ok && !r.start.Before(done), fmt.Sprintf("event %d sent before event %d was delivered", r.seq, p))
	}
}
