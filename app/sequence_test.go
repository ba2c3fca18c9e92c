package app_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// TestSequenceIsDenseUnderConcurrency appends from many goroutines at once,
// single events and batches into two projects, while readers page forward
// from the last sequence they saw. Sequences must come out 1..N with no gap
// or duplicate, the chain must verify, and no reader may ever find an event
// at or below a sequence it has already passed. Half the writers go
// through a second App on the same database, as another process would: each
// App's coalesced appends expect the head its own last append left, which
// the other's appends keep moving.
func TestSequenceIsDenseUnderConcurrency(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	apps := []*app.App{b.app, app.New(store.New(b.pool), app.Config{})}
	const (
		writers   = 12
		perWriter = 20
	)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				var err error
				if i%5 == 0 {
					_, err = apps[w%2].RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
						draft("p1", "device.batch"), draft("p2", "device.batch"), draft("p1", "device.batch"),
					}})
				} else {
					_, err = apps[w%2].RecordAuditEvent(ctx, b.writer, draft("p1", fmt.Sprintf("device.w%d", w)), "")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}

	// Readers resume after the last sequence seen, as a live feed would.
	var stop atomic.Bool
	var readers sync.WaitGroup
	readerErrs := make(chan error, 2)
	for range 2 {
		readers.Go(func() {
			var last uint64
			seen := map[uint64]bool{}
			for {
				done := stop.Load()
				page, err := b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1", AfterSequence: &last})
				if err != nil {
					readerErrs <- err
					return
				}
				for _, e := range page.Edges {
					s := e.Event.Sequence
					if s != last+1 || seen[s] {
						readerErrs <- fmt.Errorf("reader after %d got %d", last, s)
						return
					}
					seen[s] = true
					last = s
				}
				if done && len(page.Edges) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	close(readerErrs)
	for err := range errs {
		require.NoError(t, err)
	}
	for err := range readerErrs {
		require.NoError(t, err)
	}

	wantP1 := writers * (perWriter/5*2 + perWriter*4/5)
	wantP2 := writers * perWriter / 5
	for project, want := range map[string]int{"p1": wantP1, "p2": wantP2} {
		var n, maxSeq, distinct int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*), max(sequence), count(DISTINCT sequence)
			FROM audit_events WHERE tenant_id = 't1' AND project_id = $1`, project).Scan(&n, &maxSeq, &distinct))
		require.Equal(t, want, n, project)
		require.Equal(t, want, maxSeq, "dense: max sequence equals count in %s", project)
		require.Equal(t, want, distinct, project)

		v, err := b.app.VerifyAuditChain(ctx, b.reader, project, nil, nil)
		require.NoError(t, err)
		require.True(t, v.Valid, project)
		require.Equal(t, uint64(want), v.CheckedCount)
		require.Equal(t, uint64(want), v.HeadSequence)
	}
}
