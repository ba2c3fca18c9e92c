package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestCommandRateLimits(t *testing.T) {
	pool := storetest.NewPool(t)
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	a := app.New(store.New(pool), app.Config{Now: clock.Now, RateLimits: app.RateLimitConfig{
		CommandsPerIdentity: app.RateLimit{Rate: 1, Burst: 2},
		CommandsPerTenant:   app.RateLimit{Rate: 1, Burst: 3},
	}})
	ctx := context.Background()
	writer := func(subject, tenant string) app.Identity {
		return app.Identity{Subject: subject, TenantID: tenant, ProjectIDs: []string{"p1"},
			Permissions: []app.Permission{app.PermissionAuditWrite}}
	}
	alice, bob, carol := writer("alice", "t1"), writer("bob", "t1"), writer("carol", "t2")

	for range 2 {
		_, err := a.RecordAuditEvent(ctx, alice, draft("p1", "device.updated"), "")
		require.NoError(t, err)
	}
	// alice's burst is spent; the refusal names the wait and writes nothing.
	_, err := a.RecordAuditEvent(ctx, alice, draft("p1", "device.updated"), "")
	requireCode(t, err, app.CodeRateLimited)
	require.Equal(t, time.Second, app.ErrorOf(err).RetryAfter)
	require.Contains(t, err.Error(), "identity")
	require.Equal(t, 2, countEvents(t, pool))

	// bob has his own bucket but shares the tenant's, which has one left.
	_, err = a.RecordAuditEvent(ctx, bob, draft("p1", "device.updated"), "")
	require.NoError(t, err)
	_, err = a.RecordAuditEvent(ctx, bob, draft("p1", "device.updated"), "")
	requireCode(t, err, app.CodeRateLimited)
	require.Contains(t, err.Error(), "tenant")

	// Another tenant is untouched.
	_, err = a.RecordAuditEvent(ctx, carol, draft("p1", "device.updated"), "")
	require.NoError(t, err)

	// A refusal by the tenant's bucket gave bob's token back: after one
	// second the tenant has one token and bob still has one.
	clock.Add(time.Second)
	_, err = a.RecordAuditEvent(ctx, bob, draft("p1", "device.updated"), "")
	require.NoError(t, err)
	require.Equal(t, 5, countEvents(t, pool))

	// Unauthorized requests are refused before they are counted.
	reader := app.Identity{Subject: "alice", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	_, err = a.RecordAuditEvent(ctx, reader, draft("p1", "device.updated"), "")
	requireCode(t, err, app.CodeForbidden)
}

func TestSubscriptionStartRateLimit(t *testing.T) {
	pool := storetest.NewPool(t)
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	a := app.New(store.New(pool), app.Config{Now: clock.Now, RateLimits: app.RateLimitConfig{
		SubscriptionsPerIdentity: app.RateLimit{Rate: 0.5, Burst: 1},
	}})
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	ctx := context.Background()
	// No live feed is configured: the first start passes the limit and
	// fails on that; the second is refused by the limit first.
	_, err := a.SubscribeAuditEvents(ctx, reader, app.SubscribeAuditEventsInput{ProjectID: "p1"})
	require.ErrorIs(t, err, app.ErrLiveUnavailable)
	_, err = a.SubscribeAuditEvents(ctx, reader, app.SubscribeAuditEventsInput{ProjectID: "p1"})
	requireCode(t, err, app.CodeRateLimited)
	require.Equal(t, 2*time.Second, app.ErrorOf(err).RetryAfter)
	// After the wait a start is allowed again.
	clock.Add(2 * time.Second)
	_, err = a.SubscribeAuditEvents(ctx, reader, app.SubscribeAuditEventsInput{ProjectID: "p1"})
	require.ErrorIs(t, err, app.ErrLiveUnavailable)
}

// TestEventVolumeRateLimit: a tenant's events are counted one by one, a
// batch counting all of its events, beside the command limits that count
// it once; a refused batch writes nothing.
func TestEventVolumeRateLimit(t *testing.T) {
	pool := storetest.NewPool(t)
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	a := app.New(store.New(pool), app.Config{Now: clock.Now, RateLimits: app.RateLimitConfig{
		EventsPerTenant: app.RateLimit{Rate: 10, Burst: 25},
	}})
	ctx := context.Background()
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	batch := func(n int) app.RecordAuditEventsInput {
		in := app.RecordAuditEventsInput{}
		for range n {
			in.Events = append(in.Events, draft("p1", "device.updated"))
		}
		return in
	}
	_, err := a.RecordAuditEvents(ctx, writer, batch(20))
	require.NoError(t, err)
	_, err = a.RecordAuditEvents(ctx, writer, batch(10))
	requireCode(t, err, app.CodeRateLimited)
	require.Contains(t, err.Error(), "events")
	require.Equal(t, 500*time.Millisecond, app.ErrorOf(err).RetryAfter, "5 left, 10 wanted: 5 more at 10/s")
	require.Equal(t, 20, countEvents(t, pool), "the refused batch wrote nothing")
	_, err = a.RecordAuditEvents(ctx, writer, batch(5))
	require.NoError(t, err)
	_, err = a.RecordAuditEvents(ctx, writer, batch(26))
	requireCode(t, err, app.CodeRateLimited) // more than the burst never passes

	other := writer
	other.TenantID = "t2"
	_, err = a.RecordAuditEvents(ctx, other, batch(25))
	require.NoError(t, err, "another tenant has its own bucket")
}

// TestVerificationRateLimit: each verifyAuditChain is charged to its
// identity's bucket.
func TestVerificationRateLimit(t *testing.T) {
	pool := storetest.NewPool(t)
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	a := app.New(store.New(pool), app.Config{Now: clock.Now, RateLimits: app.RateLimitConfig{
		VerificationsPerIdentity: app.RateLimit{Rate: 1, Burst: 2},
	}})
	ctx := context.Background()
	reader := app.Identity{Subject: "auditor", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	for range 2 {
		_, err := a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
		require.NoError(t, err)
	}
	_, err := a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	requireCode(t, err, app.CodeRateLimited)
	other := reader
	other.Subject = "another"
	_, err = a.VerifyAuditChain(ctx, other, "p1", nil, nil)
	require.NoError(t, err, "per identity")
	clock.Add(time.Second)
	_, err = a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
}
