package app

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func coalesceDraft(action string) domain.AuditEventDraft {
	return domain.AuditEventDraft{
		ProjectID:  "p1",
		Action:     action,
		OccurredAt: time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC),
		Subject:    domain.Subject{Type: domain.SubjectService, ID: "svc"},
		Resource:   domain.Resource{Type: "device", ID: "d1"},
		Outcome:    domain.OutcomeSuccess,
		Details:    json.RawMessage(`{}`),
	}
}

// TestCoalescedAppendsShareATransactionAndFailAlone holds the project's head
// lock from outside so that appends pile up in memory, then releases it:
// the waiting appends commit together (one recordedAt, dense sequences),
// while the one that conflicts fails alone.
func TestCoalescedAppendsShareATransactionAndFailAlone(t *testing.T) {
	pool := storetest.NewPool(t)
	a := New(store.New(pool), Config{})
	ctx := context.Background()
	writer := Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []Permission{PermissionAuditWrite}}

	known := coalesceDraft("device.known")
	known.ID = uuid.New()
	first, err := a.RecordAuditEvent(ctx, writer, known, "")
	require.NoError(t, err)

	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(ctx) //nolint:errcheck
	_, err = blocker.Exec(ctx, "SELECT 1 FROM audit_project_heads WHERE tenant_id = 't1' AND project_id = 'p1' FOR UPDATE")
	require.NoError(t, err)

	type result struct {
		name string
		ev   domain.AuditEvent
		err  error
	}
	results := make(chan result, 32)
	var wg sync.WaitGroup
	send := func(name string, d domain.AuditEventDraft) {
		wg.Go(func() {
			e, err := a.RecordAuditEvent(ctx, writer, d, "")
			results <- result{name, e, err}
		})
	}
	key := projectKey{"t1", "p1"}
	waiting := func() int {
		a.coalescer.mu.Lock()
		defer a.coalescer.mu.Unlock()
		if q := a.coalescer.queues[key]; q != nil {
			return len(q.waiting)
		}
		return -1
	}

	// The first append takes the queue and blocks on the lock...
	send("lead", coalesceDraft("device.lead"))
	require.Eventually(t, func() bool { return waiting() == 0 }, 10*time.Second, 5*time.Millisecond)
	// ...and the next ones wait in memory.
	const fresh = 18
	for range fresh {
		send("fresh", coalesceDraft("device.fresh"))
	}
	conflicting := known
	conflicting.Outcome = domain.OutcomeFailure
	send("conflict", conflicting)
	send("repeat", known)
	require.Eventually(t, func() bool { return waiting() == fresh+2 }, 10*time.Second, 5*time.Millisecond)

	require.NoError(t, blocker.Commit(ctx))
	wg.Wait()
	close(results)

	var freshEvents []domain.AuditEvent
	for r := range results {
		switch r.name {
		case "conflict":
			require.Error(t, r.err)
			require.Equal(t, CodeIdempotencyConflict, ErrorOf(r.err).Code)
		case "repeat":
			require.NoError(t, r.err)
			require.Equal(t, first.Sequence, r.ev.Sequence)
		case "lead":
			require.NoError(t, r.err)
			require.Equal(t, uint64(2), r.ev.Sequence)
		default:
			require.NoError(t, r.err)
			freshEvents = append(freshEvents, r.ev)
		}
	}
	require.Len(t, freshEvents, fresh)
	sort.Slice(freshEvents, func(i, j int) bool { return freshEvents[i].Sequence < freshEvents[j].Sequence })
	for i, e := range freshEvents {
		require.Equal(t, uint64(3+i), e.Sequence, "dense after the lead")
		require.True(t, e.RecordedAt.Equal(freshEvents[0].RecordedAt), "one shared transaction")
	}

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n))
	require.Equal(t, 2+fresh, n)
	v, err := a.VerifyAuditChain(ctx, Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []Permission{PermissionAuditRead}}, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(2+fresh), v.HeadSequence)
	require.Eventually(t, func() bool { return waiting() == -1 }, 5*time.Second, 5*time.Millisecond, "the queue is gone once drained")
}

// TestLoneAppendRunsUnderItsCallersContext blocks a lone append, which
// runs on its caller's goroutine, on the project's head lock held from
// outside: its caller still gets the context's error when the context
// ends, not once the lock is released (a transaction detached from it
// would hold the caller until its own one-minute bound), and the project
// takes appends again afterwards.
func TestLoneAppendRunsUnderItsCallersContext(t *testing.T) {
	pool, a, writer := appendsAfterOne(t, 0)
	ctx := context.Background()
	var err error

	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, "SELECT 1 FROM audit_project_heads WHERE tenant_id = 't1' AND project_id = 'p1' FOR UPDATE")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = a.RecordAuditEvent(short, writer, coalesceDraft("device.lone"), "")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second, "the caller waited for the lock, not for its context")
	require.NoError(t, blocker.Rollback(ctx))

	e, err := a.RecordAuditEvent(ctx, writer, coalesceDraft("device.next"), "")
	require.NoError(t, err)
	require.GreaterOrEqual(t, e.Sequence, uint64(2))
}
