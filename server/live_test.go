package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/server"
)

// liveStream reads a long-lived text/event-stream response frame by frame.
type liveStream struct {
	t      *testing.T
	resp   *http.Response
	frames chan sseFrame
}

// sseFrame is one SSE frame: its fields, or a comment.
type sseFrame struct {
	id, event, data, comment string
}

func (b *testBundle) openLive(t *testing.T, token, path string, header ...string) *liveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return startLiveStream(t, req)
}

// graphqlSSERequest is a graphql-sse request (distinct connections mode)
// of document with vars, as token; cancel (also called when t ends) drops
// its connection.
func (b *testBundle) graphqlSSERequest(t *testing.T, token, document string, vars map[string]any) (req *http.Request, cancel context.CancelFunc) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": document, "variables": vars})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/graphql", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	return req, cancel
}

// startLiveStream sends req and reads its text/event-stream response frame
// by frame (none when the status is not 200).
func startLiveStream(t *testing.T, req *http.Request) *liveStream {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	s := &liveStream{t: t, resp: resp, frames: make(chan sseFrame, 64)}
	if resp.StatusCode != http.StatusOK {
		close(s.frames)
		return s
	}
	go func() {
		defer close(s.frames)
		sc := bufio.NewScanner(resp.Body)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f != (sseFrame{}) {
					s.frames <- f
				}
				f = sseFrame{}
			case strings.HasPrefix(line, ":"):
				f.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
	}()
	return s
}

// next returns the next frame that is not a heartbeat or retry hint.
func (s *liveStream) next() (sseFrame, bool) {
	s.t.Helper()
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return sseFrame{}, false
			}
			if f.comment != "" || (f.event == "" && f.data == "") {
				continue
			}
			return f, true
		case <-time.After(30 * time.Second):
			s.t.Fatal("no frame within 30s")
		}
	}
}

// ids reads n audit frames and returns their ids.
func (s *liveStream) ids(n int) []string {
	s.t.Helper()
	var out []string
	for len(out) < n {
		f, ok := s.next()
		require.True(s.t, ok, "stream ended after %v", out)
		require.Equal(s.t, "audit", f.event)
		out = append(out, f.id)
	}
	return out
}

func TestLiveSSEFollows(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.HeartbeatInterval = 50 * time.Millisecond })
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 2, "device.before")

	s := b.openLive(t, tok, "/api/v1/audit/events/stream?projectId="+projectA+"&follow=true")
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	require.Equal(t, []string{"1", "2"}, s.ids(2), "replays what is committed")
	b.recordN(t, tok, 3, "device.after")
	require.Equal(t, []string{"3", "4", "5"}, s.ids(3), "then follows")

	// Heartbeats arrive while idle.
	deadline := time.After(10 * time.Second)
	for beat := false; !beat; {
		select {
		case f := <-s.frames:
			beat = f.comment == "heartbeat"
		case <-deadline:
			t.Fatal("no heartbeat")
		}
	}

	// A reconnect resumes after Last-Event-ID, filters applying.
	r := b.openLive(t, tok, "/api/v1/audit/events/stream?projectId="+projectA+"&follow=true&action=device.after", "Last-Event-ID", "3")
	require.Equal(t, []string{"4", "5"}, r.ids(2))
	b.recordN(t, tok, 1, "device.before")
	b.recordN(t, tok, 1, "device.after")
	require.Equal(t, []string{"7"}, r.ids(1))
	f, _ := s.next()
	require.Equal(t, "6", f.id)
	var ev event
	require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
	require.Equal(t, "6", ev.Sequence)
	require.Equal(t, "device.before", ev.Action)

	// Shutdown ends live streams, so the HTTP server can stop.
	b.server.Shutdown(context.Background())
	for {
		if _, ok := s.next(); !ok {
			break
		}
	}
}

func TestLiveSSERefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	s := b.openLive(t, tok, "/api/v1/audit/events/stream?projectId="+projectA+"&follow=maybe")
	requireProblem(t, s.resp, http.StatusBadRequest, "BAD_USER_INPUT")
	s = b.openLive(t, tok, "/api/v1/audit/events/stream?projectId=proj-2&follow=true")
	requireProblem(t, s.resp, http.StatusNotFound, "NOT_FOUND")
}

func TestLiveSSEEndsWhenTheTokenExpires(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// exp has whole-second precision: the token expires 1-2 s from now.
	tok := b.token(t, tokenOpts{ttl: 2 * time.Second, now: time.Now().Truncate(time.Second)})
	s := b.openLive(t, tok, "/api/v1/audit/events/stream?projectId="+projectA+"&follow=true")
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	f, ok := s.next()
	require.True(t, ok)
	require.Equal(t, "error", f.event)
	require.Contains(t, f.data, "UNAUTHENTICATED")
	_, ok = s.next()
	require.False(t, ok, "the stream ends")
}

// TestGraphQLSubscriptionOverSSE drives auditEventRecorded through the
// graphql-sse transport.
func TestGraphQLSubscriptionOverSSE(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 2, "device.before")

	body, err := json.Marshal(map[string]any{
		"query":     `subscription($p: ID!, $after: Uint64) { auditEventRecorded(projectId: $p, afterSequence: $after) { sequence action } }`,
		"variables": map[string]any{"p": projectA, "after": "1"},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/graphql", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")

	sc := bufio.NewScanner(resp.Body)
	var seqs []string
	recorded := false
	for len(seqs) < 2 && sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var msg struct {
			Data struct {
				AuditEventRecorded struct {
					Sequence string `json:"sequence"`
				} `json:"auditEventRecorded"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(line[6:]), &msg), line)
		seqs = append(seqs, msg.Data.AuditEventRecorded.Sequence)
		if !recorded {
			recorded = true
			b.recordN(t, tok, 1, "device.after")
		}
	}
	require.Equal(t, []string{"2", "3"}, seqs)
}

// TestGraphQLSSEHeartbeatAndShutdown: a graphql-sse subscription gets
// heartbeat comments while idle, and Server.Shutdown ends it at once,
// without the protocol's complete event (so that clients reconnect and
// resume rather than take the subscription as finished).
func TestGraphQLSSEHeartbeatAndShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.HeartbeatInterval = 50 * time.Millisecond })
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 1, "device.before")

	req, _ := b.graphqlSSERequest(t, tok, `subscription($p: ID!) { auditEventRecorded(projectId: $p, afterSequence: "0") { sequence } }`,
		map[string]any{"p": projectA})
	s := startLiveStream(t, req)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)

	f, ok := s.next()
	require.True(t, ok)
	require.Equal(t, "next", f.event)
	require.JSONEq(t, `{"data":{"auditEventRecorded":{"sequence":"1"}}}`, f.data)

	// Heartbeats arrive while idle.
	deadline := time.After(10 * time.Second)
	for beat := false; !beat; {
		select {
		case f := <-s.frames:
			beat = f.comment == "ping"
		case <-deadline:
			t.Fatal("no heartbeat")
		}
	}

	b.server.Shutdown(context.Background())
	var rest []sseFrame
	for {
		f, ok := s.next()
		if !ok {
			break
		}
		rest = append(rest, f)
	}
	require.Empty(t, rest, "frames after shutdown (no complete event)")
}
