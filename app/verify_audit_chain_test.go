package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

func recordN(t *testing.T, b *testBundle, project string, n int) []domain.AuditEvent {
	t.Helper()
	drafts := make([]domain.AuditEventDraft, n)
	for i := range drafts {
		drafts[i] = draft(project, "device.updated")
	}
	events, err := b.app.RecordAuditEvents(context.Background(), b.writer, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)
	return events
}

// tamper rewrites a stored event behind the append-only trigger's back, as
// an attacker with database access would.
func tamper(t *testing.T, b *testBundle, project string, seq int, set string) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, "ALTER TABLE audit_events DISABLE TRIGGER USER")
	require.NoError(t, err)
	tag, err := tx.Exec(ctx, "UPDATE audit_events SET "+set+" WHERE tenant_id = 't1' AND project_id = $1 AND sequence = $2", project, seq)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	_, err = tx.Exec(ctx, "ALTER TABLE audit_events ENABLE TRIGGER USER")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func TestVerifyAuditChain(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	events := recordN(t, b, "p1", 10)

	v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(10), v.CheckedCount)
	require.Nil(t, v.FirstInvalidSequence)
	require.Equal(t, uint64(10), v.HeadSequence)
	require.Equal(t, events[9].ChainHash, v.HeadHash)

	from, to := uint64(4), uint64(6)
	v, err = b.app.VerifyAuditChain(ctx, b.reader, "p1", &from, &to)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(3), v.CheckedCount)

	// An empty project verifies trivially.
	v, err = b.app.VerifyAuditChain(ctx, b.reader, "p2", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Zero(t, v.CheckedCount)

	_, err = b.app.VerifyAuditChain(ctx, b.reader, "p1", &to, &from)
	requireCode(t, err, app.CodeBadUserInput)
	_, err = b.app.VerifyAuditChain(ctx, b.writer, "p1", nil, nil)
	requireCode(t, err, app.CodeForbidden)
}

func TestVerifyAuditChainFindsTampering(t *testing.T) {
	for name, set := range map[string]string{
		"content":          "details = '{\"k\":\"forged\"}'",
		"outcome":          "outcome = 'FAILURE'",
		"content and hash": "resource_id = 'other', chain_hash = sha256(chain_hash)",
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			ctx := context.Background()
			recordN(t, b, "p1", 8)
			tamper(t, b, "p1", 5, set)

			v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
			require.NoError(t, err)
			require.False(t, v.Valid)
			require.NotNil(t, v.FirstInvalidSequence)
			require.Equal(t, uint64(5), *v.FirstInvalidSequence)
			require.Equal(t, uint64(4), v.CheckedCount)

			// A range before the altered event is still valid.
			to := uint64(4)
			v, err = b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, &to)
			require.NoError(t, err)
			require.True(t, v.Valid)
		})
	}
}

func TestVerifyAuditChainFindsRemovedEvent(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	recordN(t, b, "p1", 6)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "ALTER TABLE audit_events DISABLE TRIGGER USER")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "DELETE FROM audit_events WHERE project_id = 'p1' AND sequence = 3")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "ALTER TABLE audit_events ENABLE TRIGGER USER")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	require.False(t, v.Valid)
	require.Equal(t, uint64(3), *v.FirstInvalidSequence)
}
