package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
)

// recordMany records n events (a multiple of client.MaxBatch) in project p.
func recordMany(t *testing.T, c *client.Client, p string, n int) {
	t.Helper()
	for i := 0; i < n; i += client.MaxBatch {
		in := make([]client.EventInput, client.MaxBatch)
		for j := range in {
			in[j] = event(p, "d")
		}
		_, err := c.RecordBatch(context.Background(), in)
		require.NoError(t, err)
	}
}

// TestVerifyChainInOneCall: a project longer than the server's budget of
// one step (1,200 events) is verified by one VerifyChain, which reports
// the server's progress items.
func TestVerifyChainInOneCall(t *testing.T) {
	b := setup(t, "AETHER_VERIFY_STEP_EVENTS=1200")
	ctx := context.Background()
	recordMany(t, b.client, "p", 3000)

	var progress []client.VerifyProgress
	v, err := b.client.VerifyChain(ctx, "p", 0, 0, client.WithVerifyProgress(func(p client.VerifyProgress) {
		progress = append(progress, p)
	}))
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(3000), v.CheckedCount)
	require.Equal(t, uint64(3000), v.HeadSequence)
	// Each step recomputes at most 1,200 events (fewer if it ran out of
	// its second): at least two progress items before the verdict.
	require.GreaterOrEqual(t, len(progress), 2, "%+v", progress)
	var last uint64
	for _, p := range progress {
		require.Greater(t, p.SequenceReached, last)
		require.LessOrEqual(t, p.SequenceReached-last, uint64(1200))
		require.Equal(t, p.SequenceReached, p.CheckedCount)
		require.Equal(t, uint64(3000), p.HeadSequence)
		last = p.SequenceReached
	}
	require.Less(t, last, uint64(3000))

	// The server's answer to bad input is the query's.
	_, err = b.client.VerifyChain(ctx, "p", 5, 4)
	require.Equal(t, client.CodeBadUserInput, client.ErrorCode(err))
}

// streamCutter forwards to the real server, but cuts the first
// verification stream right after its first item, as a dropped connection
// would; it records the variables of each stream request.
type streamCutter struct {
	mu      sync.Mutex
	streams []map[string]any
	cut     atomic.Bool
}

func (s *streamCutter) handler(target string) http.Handler {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}
		_ = json.Unmarshal(body, &req)
		if !strings.Contains(req.Query, "auditChainVerification") {
			proxy.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		s.streams = append(s.streams, req.Variables)
		s.mu.Unlock()
		if s.cut.CompareAndSwap(false, true) {
			w = &cutAfterFirstItem{ResponseWriter: w}
		}
		proxy.ServeHTTP(w, r)
	})
}

// cutAfterFirstItem drops the connection once the first "next" event was
// written whole, before anything after it.
type cutAfterFirstItem struct {
	http.ResponseWriter
	inItem bool
}

func (c *cutAfterFirstItem) Write(p []byte) (int, error) {
	n := len(p)
	if !c.inItem {
		i := bytes.Index(p, []byte("event: next"))
		if i < 0 {
			return c.ResponseWriter.Write(p)
		}
		c.inItem = true
		if _, err := c.ResponseWriter.Write(p[:i]); err != nil {
			return 0, err
		}
		p = p[i:]
	}
	end := bytes.Index(p, []byte("\n\n"))
	if end < 0 {
		_, err := c.ResponseWriter.Write(p)
		return n, err
	}
	_, _ = c.ResponseWriter.Write(p[:end+2])
	c.ResponseWriter.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

func (c *cutAfterFirstItem) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// TestVerifyChainResumesADroppedStream: the stream drops after its first
// progress item; VerifyChain goes on from that item's token.
func TestVerifyChainResumesADroppedStream(t *testing.T) {
	b := setup(t, "AETHER_VERIFY_STEP_EVENTS=1200")
	ctx := context.Background()
	recordMany(t, b.client, "p", 3000)
	cutter := &streamCutter{}
	proxy := httptest.NewServer(cutter.handler(b.srv.URL))
	defer proxy.Close()
	c, err := client.New(proxy.URL, client.Options{Token: b.token})
	require.NoError(t, err)

	var progress []client.VerifyProgress
	v, err := c.VerifyChain(ctx, "p", 0, 0, client.WithVerifyProgress(func(p client.VerifyProgress) {
		progress = append(progress, p)
	}))
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(3000), v.CheckedCount, "counts go on across the streams")
	require.Len(t, cutter.streams, 2)
	require.Nil(t, cutter.streams[0]["resume"])
	require.NotEmpty(t, cutter.streams[1]["resume"], "the second stream resumes")
	require.Nil(t, cutter.streams[1]["from"])
	require.NotEmpty(t, progress)
	require.Less(t, progress[0].SequenceReached, uint64(3000))
}
