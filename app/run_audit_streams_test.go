package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// claimCounter is the real store, counting the stream worker's claims.
type claimCounter struct {
	*store.Store
	claims *atomic.Int64
}

// ClaimAuditStreamCursors counts the call and claims from the store.
func (c claimCounter) ClaimAuditStreamCursors(ctx context.Context, owner uuid.UUID, now, leaseUntil time.Time, limit int) ([]domain.AuditStreamCursor, error) {
	c.claims.Add(1)
	return c.Store.ClaimAuditStreamCursors(ctx, owner, now, leaseUntil, limit)
}

// TestAuditStreamWorkerWithoutStreamsClaimsNothing runs the stream worker
// of a database without streams: the append signals (the live hub's, here
// sent by the test) and its polls send no claim, only the poll's look for
// cursors. A stream created later is found at the next poll and delivered.
func TestAuditStreamWorkerWithoutStreamsClaimsNothing(t *testing.T) {
	t.Parallel()
	var claims atomic.Int64
	b := setupStreams(t, streamOpts{streams: app.StreamConfig{Poll: 200 * time.Millisecond}, claims: &claims})
	wake := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.app.RunAuditStreams(ctx, wake) }()
	t.Cleanup(func() { cancel(); <-done })

	b.record(t, "p1", "door.opened", 3)
	for range 5 {
		wake <- struct{}{} // taken: the worker has looked for work after the previous one
	}
	require.Zero(t, claims.Load(), "no stream, no claim")

	s := b.createHTTPS(t, "/late", app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}})
	b.record(t, "p1", "door.opened", 2)
	b.awaitCaughtUp(t, s.Stream.Stream.ID.String(), map[string]uint64{"p1": b.head(t, "p1")})
	require.NotZero(t, claims.Load())
}
