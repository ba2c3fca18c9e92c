package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
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

// verifyAll verifies p1 call by call, following resume tokens, and returns
// the calls' results.
func verifyAll(t *testing.T, a *app.App, reader app.Identity) []app.ChainVerification {
	t.Helper()
	in := app.VerifyAuditChainInput{ProjectID: "p1"}
	var out []app.ChainVerification
	for range 100 {
		v, err := a.VerifyAuditChainResumable(context.Background(), reader, in)
		require.NoError(t, err)
		out = append(out, v)
		if v.Complete {
			require.Nil(t, v.ResumeToken)
			return out
		}
		require.False(t, v.Valid, "a call that stopped at its budget is not valid yet")
		require.Nil(t, v.FirstInvalidSequence)
		require.NotNil(t, v.ResumeToken)
		in = app.VerifyAuditChainInput{ProjectID: "p1", ResumeToken: *v.ResumeToken}
	}
	t.Fatal("verification did not complete in 100 calls")
	return nil
}

// TestVerifyAuditChainResumes verifies a project longer than one call's
// budget (events, then time) in several calls, each resuming where the
// last stopped, and finds tampering in a resumed call.
func TestVerifyAuditChainResumes(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for range 3 {
		recordN(t, b, "p1", 1000)
	}
	checked := func(vs []app.ChainVerification) []uint64 {
		var out []uint64
		for _, v := range vs {
			out = append(out, v.CheckedCount)
		}
		return out
	}

	byEvents := app.New(store.New(b.pool), app.Config{Verify: app.VerifyLimits{MaxEvents: 1200}})
	vs := verifyAll(t, byEvents, b.reader)
	require.Equal(t, []uint64{1200, 2400, 3000}, checked(vs), "cumulative counts, 1,200 events per call")
	last := vs[len(vs)-1]
	require.True(t, last.Valid)
	require.Equal(t, uint64(3000), last.HeadSequence)

	// A time budget that is always spent: one chunk (1,024 events) per call.
	byTime := app.New(store.New(b.pool), app.Config{Verify: app.VerifyLimits{MaxEvents: 16384, MaxDuration: time.Nanosecond}})
	vs = verifyAll(t, byTime, b.reader)
	require.Equal(t, []uint64{1024, 2048, 3000}, checked(vs))
	require.True(t, vs[2].Valid)

	// The default budget verifies it in one call.
	v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.True(t, v.Complete)

	// A resume token keeps its range; it goes with its own project only
	// and without a range of its own.
	from, to := uint64(1), uint64(2000)
	v, err = byEvents.VerifyAuditChain(ctx, b.reader, "p1", &from, &to)
	require.NoError(t, err)
	require.False(t, v.Complete)
	token := *v.ResumeToken
	v, err = byEvents.VerifyAuditChainResumable(ctx, b.reader, app.VerifyAuditChainInput{ProjectID: "p1", ResumeToken: token})
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.True(t, v.Complete)
	require.Equal(t, uint64(2000), v.CheckedCount)
	for _, in := range []app.VerifyAuditChainInput{
		{ProjectID: "p2", ResumeToken: token},
		{ProjectID: "p1", ResumeToken: token, FromSequence: &from},
		{ProjectID: "p1", ResumeToken: "not-a-token"},
		{ProjectID: "p1", ResumeToken: token[:len(token)-4]},
	} {
		_, err = byEvents.VerifyAuditChainResumable(ctx, b.reader, in)
		requireCode(t, err, app.CodeBadUserInput)
	}

	// Tampering past the first call is found by the call that reaches it.
	tamper(t, b, "p1", 1500, "outcome = 'FAILURE'")
	vs = verifyAll(t, byEvents, b.reader)
	require.Len(t, vs, 2)
	require.False(t, vs[1].Valid)
	require.Equal(t, uint64(1500), *vs[1].FirstInvalidSequence)
	require.Equal(t, uint64(1499), vs[1].CheckedCount)
}
