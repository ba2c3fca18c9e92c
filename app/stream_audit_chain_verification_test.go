package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/store"
)

// streamItems reads a verification stream to its end and returns its
// items.
func streamItems(t *testing.T, s *app.ChainVerificationStream) []app.ChainVerification {
	t.Helper()
	ctx := context.Background()
	var out []app.ChainVerification
	for range 100 {
		v, err := s.Next(ctx)
		require.NoError(t, err)
		out = append(out, *v)
		if v.Complete {
			_, err = s.Next(ctx)
			require.ErrorIs(t, err, app.ErrStreamEnded, "the stream ends after its final item")
			return out
		}
		require.False(t, v.Valid, "a progress item is not valid yet")
		require.Nil(t, v.FirstInvalidSequence)
		require.NotNil(t, v.ResumeToken)
	}
	t.Fatal("the stream did not end in 100 items")
	return nil
}

// checkedCounts lists the items' CheckedCount.
func checkedCounts(vs []app.ChainVerification) []uint64 {
	var out []uint64
	for _, v := range vs {
		out = append(out, v.CheckedCount)
	}
	return out
}

// reached lists the items' SequenceReached.
func reached(vs []app.ChainVerification) []uint64 {
	var out []uint64
	for _, v := range vs {
		out = append(out, v.SequenceReached)
	}
	return out
}

// TestStreamAuditChainVerification verifies a project longer than one
// step's budget (1,200 events; no time bound) in one stream: a progress
// item per step, resumable from its token, then the verdict.
func TestStreamAuditChainVerification(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for range 3 {
		recordN(t, b, "p1", 1000)
	}
	a := app.New(store.New(b.pool), app.Config{Verify: app.VerifyLimits{MaxEvents: 1200, MaxDuration: time.Hour, ProgressInterval: time.Hour}})
	stream := func(in app.VerifyAuditChainInput) []app.ChainVerification {
		t.Helper()
		s, err := a.StreamAuditChainVerification(ctx, b.reader, in)
		require.NoError(t, err)
		defer s.Close()
		return streamItems(t, s)
	}

	vs := stream(app.VerifyAuditChainInput{ProjectID: "p1"})
	require.Equal(t, []uint64{1200, 2400, 3000}, reached(vs))
	require.Equal(t, []uint64{1200, 2400, 3000}, checkedCounts(vs))
	last := vs[2]
	require.True(t, last.Valid)
	require.True(t, last.Complete)
	require.Nil(t, last.ResumeToken)
	require.Equal(t, uint64(3000), last.HeadSequence)
	require.Positive(t, last.EventsPerSecond)

	// The verdict is the query's (which, by default, needs one call).
	q, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	last.EventsPerSecond, q.EventsPerSecond = 0, 0
	require.Equal(t, q, last)

	// A progress item's token resumes the stream after it, and the query
	// takes it too.
	resumed := stream(app.VerifyAuditChainInput{ProjectID: "p1", ResumeToken: *vs[0].ResumeToken})
	require.Equal(t, []uint64{2400, 3000}, reached(resumed))
	require.Equal(t, []uint64{2400, 3000}, checkedCounts(resumed), "counts go on from the token's")
	require.True(t, resumed[1].Valid)
	v, err := a.VerifyAuditChainResumable(ctx, b.reader, app.VerifyAuditChainInput{ProjectID: "p1", ResumeToken: *vs[1].ResumeToken})
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(3000), v.CheckedCount)

	// A range.
	from, to := uint64(100), uint64(2600)
	ranged := stream(app.VerifyAuditChainInput{ProjectID: "p1", FromSequence: &from, ToSequence: &to})
	require.Equal(t, []uint64{1299, 2499, 2600}, reached(ranged))
	require.True(t, ranged[2].Valid)
	require.Equal(t, uint64(2501), ranged[2].CheckedCount)

	// Tampering past the first step ends the stream with the verdict.
	tamper(t, b, "p1", 1500, "outcome = 'FAILURE'")
	vs = stream(app.VerifyAuditChainInput{ProjectID: "p1"})
	require.Len(t, vs, 2)
	require.False(t, vs[1].Valid)
	require.True(t, vs[1].Complete)
	require.Equal(t, uint64(1500), *vs[1].FirstInvalidSequence)
	require.Equal(t, uint64(1499), vs[1].CheckedCount)
	require.Equal(t, uint64(1499), vs[1].SequenceReached)
}

// TestStreamAuditChainVerificationRefuses: the permission, bad input as
// the query answers it, and another tenant's project, which looks like an
// empty one.
func TestStreamAuditChainVerificationRefuses(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	recordN(t, b, "p1", 5)
	_, err := b.app.StreamAuditChainVerification(ctx, b.writer, app.VerifyAuditChainInput{ProjectID: "p1"})
	requireCode(t, err, app.CodeForbidden)
	limited := b.reader
	limited.ProjectIDs = []string{"p2"}
	_, err = b.app.StreamAuditChainVerification(ctx, limited, app.VerifyAuditChainInput{ProjectID: "p1"})
	_, qerr := b.app.VerifyAuditChainResumable(ctx, limited, app.VerifyAuditChainInput{ProjectID: "p1"})
	require.Error(t, qerr)
	requireCode(t, err, app.ErrorOf(qerr).Code)

	// A resume token of the range 1..4, stopped after 2.
	small := app.New(store.New(b.pool), app.Config{Verify: app.VerifyLimits{MaxEvents: 2}})
	one, four, three := uint64(1), uint64(4), uint64(3)
	v, err := small.VerifyAuditChain(ctx, b.reader, "p1", &one, &four)
	require.NoError(t, err)
	token := *v.ResumeToken
	for _, in := range []app.VerifyAuditChainInput{
		{ProjectID: "p1", FromSequence: &four, ToSequence: &three},
		{ProjectID: "p1", FromSequence: &[]uint64{0}[0]},
		{ProjectID: "p1", ResumeToken: token, FromSequence: &one},
		{ProjectID: "p1", ResumeToken: "not-a-token"},
		{ProjectID: "p2", ResumeToken: token},
	} {
		_, err = b.app.StreamAuditChainVerification(ctx, b.reader, in)
		requireCode(t, err, app.CodeBadUserInput)
		_, qerr := b.app.VerifyAuditChainResumable(ctx, b.reader, in)
		requireCode(t, qerr, app.CodeBadUserInput)
	}

	// Another tenant's p1 is its own, empty, project.
	s, err := b.app.StreamAuditChainVerification(ctx, inTenant(b.reader, "t2"), app.VerifyAuditChainInput{ProjectID: "p1"})
	require.NoError(t, err)
	defer s.Close()
	vs := streamItems(t, s)
	require.Len(t, vs, 1)
	require.True(t, vs[0].Valid)
	require.Zero(t, vs[0].CheckedCount)
	require.Zero(t, vs[0].HeadSequence)
}

// TestStreamAuditChainVerificationLimits: a tenant, and a connection, run
// a bounded number of streams at once; Close frees a slot.
func TestStreamAuditChainVerificationLimits(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	recordN(t, b, "p1", 3)
	a := app.New(store.New(b.pool), app.Config{Verify: app.VerifyLimits{StreamsPerTenant: 2, StreamsPerConnection: 1}})
	in := app.VerifyAuditChainInput{ProjectID: "p1"}
	start := func(ctx context.Context, id app.Identity) (*app.ChainVerificationStream, error) {
		return a.StreamAuditChainVerification(ctx, id, in)
	}

	conn := app.ContextWithConnection(ctx)
	s1, err := start(conn, b.reader)
	require.NoError(t, err)
	_, err = start(conn, b.reader)
	requireCode(t, err, app.CodeQuotaExceeded)
	s2, err := start(app.ContextWithConnection(ctx), b.reader)
	require.NoError(t, err, "another connection of the tenant")
	_, err = start(ctx, b.reader)
	requireCode(t, err, app.CodeQuotaExceeded)
	s3, err := start(ctx, inTenant(b.reader, "t2"))
	require.NoError(t, err, "another tenant has its own")
	defer s3.Close()

	// A stream that ended still holds its slot until Close.
	streamItems(t, s1)
	_, err = start(ctx, b.reader)
	requireCode(t, err, app.CodeQuotaExceeded)
	s1.Close()
	s1.Close() // frees its slots once
	s4, err := start(conn, b.reader)
	require.NoError(t, err, "the connection's slot came back")
	defer s4.Close()
	_, err = start(ctx, b.reader)
	requireCode(t, err, app.CodeQuotaExceeded) // s2 and s4: the second Close freed nothing
	s2.Close()

	// A start refused for its input (read before the slots, or after)
	// holds no slot.
	s5, err := start(ctx, b.reader)
	require.NoError(t, err)
	_, err = a.StreamAuditChainVerification(ctx, b.reader, app.VerifyAuditChainInput{ProjectID: "p1", ResumeToken: "bad"})
	requireCode(t, err, app.CodeBadUserInput)
	s5.Close()
	from, to := uint64(3), uint64(2)
	_, err = a.StreamAuditChainVerification(ctx, b.reader, app.VerifyAuditChainInput{ProjectID: "p1", FromSequence: &from, ToSequence: &to})
	requireCode(t, err, app.CodeBadUserInput)
	s6, err := start(ctx, b.reader)
	require.NoError(t, err)
	defer s6.Close()
	_, err = start(ctx, b.reader)
	requireCode(t, err, app.CodeQuotaExceeded)
}

// TestStreamAuditChainVerificationCancel: the work runs under the caller's
// context, and stops with it.
func TestStreamAuditChainVerificationCancel(t *testing.T) {
	b := setup(t)
	for range 3 {
		recordN(t, b, "p1", 1000)
	}
	a := app.New(store.New(b.pool), app.Config{Verify: app.VerifyLimits{MaxEvents: 1200, MaxDuration: time.Hour, ProgressInterval: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := a.StreamAuditChainVerification(ctx, b.reader, app.VerifyAuditChainInput{ProjectID: "p1"})
	require.NoError(t, err)
	defer s.Close()
	v, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1200), v.SequenceReached)
	cancel()
	_, err = s.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)
}
