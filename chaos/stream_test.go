package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// streamReceiver is an HTTPS-stream receiver on loopback (plain HTTP, which
// the deployment's development settings allow). It keeps, per project, the
// sequences of every request that arrived whole, in arrival order, whether
// or not its answer reached the sender. It can be down (503), or hold the
// requests that arrive until released.
type streamReceiver struct {
	url string

	mu   sync.Mutex
	seqs map[string][]uint64
	down bool
	// hold, when set, receives each request that arrives and the request
	// waits until release is closed.
	hold    chan struct{}
	release chan struct{}
}

func newStreamReceiver(t *testing.T) *streamReceiver {
	t.Helper()
	r := &streamReceiver{seqs: map[string][]uint64{}}
	srv := httptest.NewServer(http.HandlerFunc(r.handle))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/stream"
	return r
}

func (r *streamReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	r.mu.Lock()
	down, hold, release := r.down, r.hold, r.release
	r.mu.Unlock()
	if down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var lines []struct {
		ProjectID string `json:"projectId"`
		Sequence  uint64 `json:"sequence,string"`
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			ProjectID string `json:"projectId"`
			Sequence  uint64 `json:"sequence,string"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		lines = append(lines, l)
	}
	// Stored before answering: a batch whose answer is lost arrives again.
	r.mu.Lock()
	for _, l := range lines {
		r.seqs[l.ProjectID] = append(r.seqs[l.ProjectID], l.Sequence)
	}
	r.mu.Unlock()
	if hold != nil {
		select {
		case hold <- struct{}{}:
		default:
		}
		<-release
	}
	w.WriteHeader(http.StatusNoContent)
}

// set changes the receiver's behaviour.
func (r *streamReceiver) set(f func(r *streamReceiver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// arrivals implements chaosSink.
func (r *streamReceiver) arrivals(t *testing.T) map[string][]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]uint64, len(r.seqs))
	for p, seqs := range r.seqs {
		out[p] = slices.Clone(seqs)
	}
	return out
}

// input implements chaosSink.
func (r *streamReceiver) input() map[string]any { return map[string]any{"type": "HTTPS", "url": r.url} }

// holdInFlight implements chaosSink: the next request that arrives is held
// until release.
func (r *streamReceiver) holdInFlight(t *testing.T, kick func()) (release func()) {
	t.Helper()
	held := make(chan struct{}, 1)
	rel := make(chan struct{})
	r.set(func(r *streamReceiver) { r.hold, r.release = held, rel })
	kick()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no request arrived to hold")
	}
	return func() {
		r.set(func(r *streamReceiver) { r.hold, r.release = nil, nil })
		close(rel)
	}
}

// setDown implements chaosSink: the receiver answers 503 while down.
func (r *streamReceiver) setDown(t *testing.T, down bool) {
	r.set(func(r *streamReceiver) { r.down = down })
}

// chaosSink is the receiving end of TestStreamComplete*: a sink a stream
// delivers to, that the scenario can hold mid-batch and take down.
type chaosSink interface {
	// input is the sink of createAuditStream.
	input() map[string]any
	// arrivals returns, per project, the sequences that arrived, in the
	// order they arrived.
	arrivals(t *testing.T) map[string][]uint64
	// holdInFlight waits until a batch is on its way to the sink and holds
	// it there until release is called. It calls kick once the hold is
	// armed: kick records events, so that a batch is due even when the
	// stream had caught up (a fast backfill can finish before the hold).
	holdInFlight(t *testing.T, kick func()) (release func())
	// setDown takes the sink down (every delivery fails) or up again.
	setDown(t *testing.T, down bool)
}

// contiguous returns, per project, the highest sequence up to which every
// sequence arrived.
func contiguous(arrivals map[string][]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for p, seqs := range arrivals {
		var next uint64 = 1
		for _, s := range seqs {
			if s == next {
				next++
			}
		}
		out[p] = next - 1
	}
	return out
}

// TestStreamCompleteThroughKillOutageAndPostgresRestart streams 100,000
// events of 3 projects over HTTPS while the serving process is killed with
// SIGKILL mid-batch, the receiver is down for a while and PostgreSQL
// restarts: every project's events all arrive, in order, and every
// duplicate carries a sequence that already arrived.
func TestStreamCompleteThroughKillOutageAndPostgresRestart(t *testing.T) {
	t.Parallel()
	streamChaos(t, newStreamReceiver(t), nil)
}

// streamChaos runs the scenario of TestStreamComplete* against rcv, with
// env added to the processes' settings.
func streamChaos(t *testing.T, rcv chaosSink, env []string) {
	pg := privateCluster(t)
	d := newDeployment(t, pg.cluster)
	d.env = append(d.env, "AETHER_STREAM_LEASE=3s", "AETHER_STREAM_WORKERS=3", "AETHER_STREAM_MAX_BACKOFF=2s")
	d.env = append(d.env, env...)
	projects := []string{"p1", "p2", "p3"}
	for i, p := range projects {
		n := 33_333
		if i == 0 {
			n++
		}
		cmd := exec.Command(aetherBin, "seed", "--tenant", tenant, "--project", p, "--events", fmt.Sprint(n), "--batch", "1000", "--data-dir", t.TempDir())
		cmd.Env = append(baseEnv(), d.env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "aether seed: %s", out)
	}
	cmd := exec.Command(aetherBin, "token", "--tenant", tenant, "--project", "*",
		"--permissions", "audit:read,audit:write,streams:read,streams:write", "--subject", "chaos", "--ttl", "1h", "--data-dir", t.TempDir())
	cmd.Env = append(baseEnv(), d.env...)
	out, err := cmd.Output()
	require.NoError(t, err)
	token := strings.TrimSpace(string(out))

	a := d.serve(t, "a")
	var created struct {
		CreateAuditStream struct{ Stream struct{ ID string } }
	}
	mustGraphQL(t, a, token, `mutation($in: CreateAuditStreamInput!) { createAuditStream(input: $in) { stream { id } } }`,
		map[string]any{"in": map[string]any{"allProjects": true, "sink": rcv.input()}}, &created)
	streamID := created.CreateAuditStream.Stream.ID

	// Once the backfill is under way, a request arrives and is held: kill
	// the process then. The backfill may have finished by the time the
	// hold is armed, so events recorded then make a batch due.
	await(t, 2*time.Minute, "the backfill is under way", func() bool {
		total := uint64(0)
		for _, n := range contiguous(rcv.arrivals(t)) {
			total += n
		}
		return total >= 20_000
	})
	release := rcv.holdInFlight(t, func() { recordIn(t, a, token, "p1", 10) })
	a.kill(t)
	release()
	// The receiver is down while another process takes over.
	rcv.setDown(t, true)
	b := d.serve(t, "b")
	for _, p := range projects {
		recordIn(t, b, token, p, 500)
	}
	type project struct {
		ProjectID string `json:"projectId"`
		Cursor    string `json:"cursor"`
		LastError *string
	}
	var health struct {
		AuditStream struct {
			State    string
			Projects []project
		}
	}
	await(t, time.Minute, "the stream reports the receiver's failure", func() bool {
		mustGraphQL(t, b, token, `query($id: ID!) { auditStream(id: $id) { state projects { projectId cursor lastError } } }`,
			map[string]any{"id": streamID}, &health)
		return health.AuditStream.State == "FAILING"
	})

	// PostgreSQL restarts while the receiver is still down.
	pg.stop(t)
	b.awaitReadyz(t, http.StatusServiceUnavailable, 30*time.Second)
	pg.start(t)
	d.pool.Reset() // the test's own connections died with the server
	b.awaitReadyz(t, http.StatusOK, time.Minute)
	for _, p := range projects {
		recordIn(t, b, token, p, 500)
	}
	rcv.setDown(t, false)

	heads := map[string]uint64{}
	for _, p := range projects {
		var h uint64
		require.NoError(t, d.pool.QueryRow(context.Background(),
			`SELECT last_sequence FROM audit_project_heads WHERE tenant_id = $1 AND project_id = $2`, tenant, p).Scan(&h))
		heads[p] = h
	}
	total := uint64(0)
	for _, h := range heads {
		total += h
	}
	require.GreaterOrEqual(t, total, uint64(100_000))
	await(t, 3*time.Minute, "every project's events arrive", func() bool {
		got := contiguous(rcv.arrivals(t))
		for p, h := range heads {
			if got[p] < h {
				return false
			}
		}
		return true
	})

	arrived := rcv.arrivals(t)
	duplicates := 0
	for p, head := range heads {
		var next uint64 = 1
		for i, s := range arrived[p] {
			if s < next {
				duplicates++
				continue
			}
			require.Equal(t, next, s, "project %s, arrival %d: a gap or a reorder", p, i)
			next++
		}
		require.Equal(t, head+1, next, "project %s", p)
	}
	t.Logf("%d events in 3 projects arrived complete and in order; %d duplicates, each of a sequence already seen", total, duplicates)
	require.True(t, b.running())
}

// recordIn records n "chaos.tick" events in project through s, in batches
// of up to 500.
func recordIn(t *testing.T, s *server, token, project string, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 500)
		events := make([]map[string]any, k)
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for i := range events {
			events[i] = map[string]any{
				"projectId": project, "action": "chaos.tick", "occurredAt": now, "outcome": "SUCCESS",
				"subject":  map[string]any{"type": "SERVICE", "id": "chaos"},
				"resource": map[string]any{"type": "probe", "id": randomHex(4)},
			}
		}
		mustGraphQL(t, s, token, `mutation($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { sequence } } }`,
			map[string]any{"in": map[string]any{"events": events}}, nil)
		n -= k
	}
}
