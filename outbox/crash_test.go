package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/internal/aethertest"
	"github.com/aetheriot/aether-audit/outbox"
)

// relayProcess is a running `aether relay`.
type relayProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startRelay runs `aether relay` from the producer's database to the
// bundle's server; it is killed when the test ends.
func (b *testBundle) startRelay(t *testing.T, log *syncLog) *relayProcess {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(b.token+"\n"), 0o600))
	cmd := exec.Command(aethertest.Bin(), "relay",
		"--source-database-url", b.producer.Config().ConnString(), "--target-url", b.srv.URL, "--token-file", tokenFile,
		"--batch-size", "200", "--poll-interval", "20ms", "--log-level", "warn")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AETHER_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = aethertest.ProcAttr()
	require.NoError(t, cmd.Start())
	p := &relayProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill ends the relay with SIGKILL and waits for it.
func (p *relayProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// syncLog collects the relays' output.
type syncLog struct {
	mu sync.Mutex
	sb strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.String()
}

// arrived is the number of events Aether holds in projects p0..p{n-1}.
func (b *testBundle) arrived(t *testing.T, n int) uint64 {
	t.Helper()
	var sum uint64
	for i := range n {
		page, err := b.client.SearchPage(context.Background(), fmt.Sprint("p", i), client.SearchOptions{PageSize: 1, Order: client.NewestFirst})
		if err != nil {
			return 0 // Aether is restarting
		}
		if len(page.Events) > 0 {
			sum += page.Events[0].Sequence
		}
	}
	return sum
}

// committed is an event the producer committed.
type committed struct {
	id, project string
	producer    int
	// began is when its transaction began, done when its commit returned.
	began, done time.Time
}

// TestCrashExactlyOnceInCommitOrder: 8 producers commit 10,000 events
// through the outbox while the relay (`aether relay`) is killed with
// SIGKILL 5 times and Aether is killed and restarted once. Every event
// arrives exactly once (each project's sequences are dense, and its ids are
// exactly those committed), and in commit order: each producer's events in
// the order it committed them, and an event whose transaction committed
// before another's began comes first.
func TestCrashExactlyOnceInCommitOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault test of about a minute")
	}
	b := setup(t)
	ctx := context.Background()
	log := &syncLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", log.String())
		}
	})
	const (
		producers = 8
		total     = 10000
		projects  = 4
	)

	var (
		mu     sync.Mutex
		events []committed
	)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 21))
			for n := 0; n < total/producers; {
				k := min(1+rng.IntN(3), total/producers-n)
				began := time.Now()
				var mine []committed
				err := pgx.BeginFunc(ctx, b.producer, func(tx pgx.Tx) error {
					for range k {
						p := fmt.Sprint("p", rng.IntN(projects))
						dev := fmt.Sprintf("dev-%d-%d", g, n)
						if _, err := tx.Exec(ctx, `INSERT INTO devices (id, firmware) VALUES ($1, '1.0')`, dev); err != nil {
							return err
						}
						id, err := outbox.Record(ctx, tx, firmwareEvent(p, dev, "1.0"))
						if err != nil {
							return err
						}
						mine = append(mine, committed{id: id, project: p, producer: g, began: began})
						n++
					}
					return nil
				})
				if err != nil {
					t.Errorf("producer %d: %v", g, err)
					return
				}
				done := time.Now()
				mu.Lock()
				for _, c := range mine {
					c.done = done
					events = append(events, c)
				}
				mu.Unlock()
			}
		})
	}

	// The faults, while the producers run: the relay killed 5 times at
	// random moments, Aether killed and restarted once.
	relay := b.startRelay(t, log)
	rng := rand.New(rand.NewPCG(21, 5))
	arrived := uint64(0)
	for kill := range 5 {
		// Each relay ships something before it dies, then dies at a random
		// moment, mid-batch or between batches.
		aethertest.Await(t, time.Minute, "the relay ships", func() bool {
			n := b.arrived(t, projects)
			if n > arrived {
				arrived = n
				return true
			}
			return false
		})
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		relay.kill()
		if kill == 2 {
			b.srv.Kill(t)
			relay = b.startRelay(t, log) // it retries while Aether is down
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
			b.srv.Restart(t)
			continue
		}
		relay = b.startRelay(t, log)
	}
	wg.Wait()
	require.Len(t, events, total)
	aethertest.Await(t, 3*time.Minute, "the outbox drains", func() bool {
		waiting, parked := b.outboxRows(t)
		require.Zero(t, parked)
		return waiting == 0
	})

	byProject := map[string][]committed{}
	for _, c := range events {
		byProject[c.project] = append(byProject[c.project], c)
	}
	for p, want := range byProject {
		got := b.events(t, p)
		require.Len(t, got, len(want), "project %s: exactly the committed events", p)
		seqOf := map[string]uint64{}
		for i, ev := range got {
			require.Equal(t, uint64(i+1), ev.Sequence, "project %s: dense sequences", p)
			_, dup := seqOf[ev.ID]
			require.False(t, dup, "project %s: event %s twice", p, ev.ID)
			seqOf[ev.ID] = ev.Sequence
		}
		// Each producer's events in its commit order.
		last := map[int]uint64{}
		order := append([]committed(nil), want...)
		sort.SliceStable(order, func(i, j int) bool { return order[i].done.Before(order[j].done) })
		for _, c := range order {
			seq, ok := seqOf[c.id]
			require.True(t, ok, "project %s: committed event %s is missing", p, c.id)
			require.Greater(t, seq, last[c.producer], "project %s: producer %d's events out of commit order", p, c.producer)
			last[c.producer] = seq
		}
		// Across producers: no event comes after one whose transaction
		// began after its own committed.
		sort.Slice(want, func(i, j int) bool { return seqOf[want[i].id] > seqOf[want[j].id] })
		earliestDoneAfter := time.Time{}
		for _, c := range want {
			if !earliestDoneAfter.IsZero() {
				require.False(t, earliestDoneAfter.Before(c.began),
					"project %s: event %s (sequence %d) began after an event with a later sequence had committed", p, c.id, seqOf[c.id])
			}
			if earliestDoneAfter.IsZero() || c.done.Before(earliestDoneAfter) {
				earliestDoneAfter = c.done
			}
		}
	}
}
