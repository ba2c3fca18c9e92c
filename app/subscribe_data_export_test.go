package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/store"
)

func TestSubscribeDataExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle's app watches exports through a live hub listening to the
	// database's notifications.
	type testBundle struct {
		*exportBundle
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{exportBundle: setupExports(t, app.ExportConfig{})}
		hub := live.New(b.pool, store.New(b.pool), live.Config{})
		hubCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); hub.Run(hubCtx) }()
		t.Cleanup(func() { stop(); <-done })
		require.Eventually(t, hub.Listening, 10*time.Second, 10*time.Millisecond)
		b.app = b.otherApp(func(c *app.Config) { c.ExportWatch = hub })
		return b
	}
	// next returns the stream's next value, waiting at most as long as a
	// lost notification may delay it (the stream polls every 5 s).
	next := func(t *testing.T, s *app.DataExportStream) (*domain.DataExport, error) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return s.Next(nctx)
	}

	t.Run("FollowsTheExportUntilItExpires", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.request(t, nil)
		s, err := b.app.SubscribeDataExport(ctx, b.user, e.ID.String())
		require.NoError(t, err)
		defer s.Close()
		cur, err := next(t, s)
		require.NoError(t, err)
		require.Equal(t, e, *cur, "first the current state")

		require.NoError(t, runExport(ctx, b.app, e, 1, nil))
		for cur.State != domain.DataExportReady {
			prev := cur.State
			cur, err = next(t, s)
			require.NoError(t, err)
			require.Contains(t, []domain.DataExportState{domain.DataExportRunning, domain.DataExportReady}, cur.State, "after %s", prev)
		}
		require.Equal(t, b.get(t, e), *cur)

		_, err = b.app.ExpireDataExport(ctx, b.user, e.ID.String(), true)
		require.NoError(t, err)
		cur, err = next(t, s)
		require.NoError(t, err)
		require.Equal(t, domain.DataExportExpired, cur.State)
		_, err = next(t, s)
		require.ErrorIs(t, err, app.ErrStreamEnded, "the stream ends after EXPIRED")
	})

	t.Run("OnlyAVisibleExport", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.request(t, nil)
		_, err := b.app.SubscribeDataExport(ctx, withPermissions(b.user, app.PermissionExportsWrite), e.ID.String())
		requireCode(t, err, app.CodeForbidden)
		requireHidden(t, b.user, app.ErrDataExportNotFound, e.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.SubscribeDataExport(ctx, who, id)
			return err
		})
	})
}
