package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
)

// TestCheckpointsAreSignedPeriodicallyAndWrittenToStorage runs a real River
// client: the periodic signer signs the project with new events at its
// interval, and the outbox job committed with each checkpoint writes it to
// the bucket as checkpoints/<tenant>/<project>/<sequence>.jws.
func TestCheckpointsAreSignedPeriodicallyAndWrittenToStorage(t *testing.T) {
	b := setupExports(t, app.ExportConfig{}, false)
	ctx := context.Background()
	key, err := checkpoint.GenerateKey()
	require.NoError(t, err)
	ring, err := checkpoint.NewKeyRing(key)
	require.NoError(t, err)
	a := app.New(store.New(b.pool), app.Config{Exports: b.cfg, Checkpoints: ring})
	record := func(n int) []domain.AuditEvent {
		t.Helper()
		drafts := make([]domain.AuditEventDraft, n)
		for i := range drafts {
			drafts[i] = domain.AuditEventDraft{ProjectID: "p1", Action: "device.updated", OccurredAt: time.Now(), Outcome: domain.OutcomeSuccess,
				Subject: domain.Subject{Type: domain.SubjectUser, ID: "u1"}, Resource: domain.Resource{Type: "device", ID: "d1"}}
		}
		evs, err := a.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: drafts})
		require.NoError(t, err)
		return evs
	}
	record(1)
	client, err := jobs.NewClient(b.pool, store.New(b.pool), jobs.ClientConfig{App: a, FetchCooldown: 10 * time.Millisecond,
		CheckpointInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})

	object := func(seq string) string {
		data, err := os.ReadFile(filepath.Join(b.dir, "checkpoints", "t1", "p1", seq+".jws"))
		if err != nil {
			return ""
		}
		return string(data)
	}
	require.Eventually(t, func() bool { return object("1") != "" }, 20*time.Second, 50*time.Millisecond)
	first := object("1")
	_, _, err = ring.Verify(first)
	require.NoError(t, err)

	evs := record(2)
	require.Eventually(t, func() bool { return object("3") != "" }, 20*time.Second, 50*time.Millisecond)
	p, _, err := ring.Verify(object("3"))
	require.NoError(t, err)
	f, err := p.Fields()
	require.NoError(t, err)
	require.NotNil(t, f.Previous)
	require.Equal(t, checkpoint.Digest(first), *f.Previous)
	require.Equal(t, evs[1].ChainHash, domain.Hash(f.ChainHash), "signed at the head, 3")
	time.Sleep(time.Second) // two more intervals
	page, err := a.AuditCheckpoints(ctx, app.Identity{TenantID: "t1", Subject: "r", ProjectIDs: []string{"p1"},
		Permissions: []app.Permission{app.PermissionAuditRead}}, app.AuditCheckpointsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "nothing new, nothing signed: one checkpoint per new head")
}
