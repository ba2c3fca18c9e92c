package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// TestRecordedByComesFromTheToken: every recorded event names the verified
// identity that recorded it, whatever the input says, and the recorder is
// inside the hashed bytes.
func TestRecordedByComesFromTheToken(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.writer
	w.Issuer, w.TokenID, w.ClientID = "https://idp.example", "jti-1", "plant-gateway"

	d := draft("p1", "device.updated")
	d.RecordedBy = &domain.Recorder{Subject: "someone-else"} // what a forger would try
	e, err := b.app.RecordAuditEvent(ctx, w, d, "")
	require.NoError(t, err)
	want := &domain.Recorder{Issuer: "https://idp.example", Subject: "svc", TokenID: "jti-1", ClientID: "plant-gateway"}
	require.Equal(t, want, e.RecordedBy)
	require.Equal(t, domain.ChainVersionRecordedBy, e.ChainVersion)

	stored, err := b.app.GetAuditEvent(ctx, b.reader, "p1", e.ID.String())
	require.NoError(t, err)
	require.Equal(t, want, stored.RecordedBy)
	require.Equal(t, e.ChainHash, stored.ComputeChainHash(domain.Hash{}))

	// A resubmission of the same event under a refreshed token is the same
	// event: the recorder is not part of the fingerprint.
	d = withID(draft("p1", "device.updated"))
	first, err := b.app.RecordAuditEvent(ctx, w, d, "")
	require.NoError(t, err)
	w.TokenID = "jti-2"
	again, err := b.app.RecordAuditEvent(ctx, w, d, "")
	require.NoError(t, err)
	require.Equal(t, first.Sequence, again.Sequence)
	require.Equal(t, "jti-1", again.RecordedBy.TokenID)

	// A command's own event names the token that ran the command.
	days := 400
	_, err = b.app.SetAuditRetention(ctx, app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{app.AllProjects},
		Permissions: []app.Permission{app.PermissionAdmin}, Issuer: "https://idp.example", TokenID: "jti-9"}, &days, true)
	require.NoError(t, err)
	page, err := b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "audit.retention.updated"}})
	require.NoError(t, err)
	require.Len(t, page.Edges, 1)
	require.Equal(t, &domain.Recorder{Issuer: "https://idp.example", Subject: "ops", TokenID: "jti-9"}, page.Edges[0].Event.RecordedBy)
}

// TestReservedNamesAreRefused: the service's own actions and "system:"
// subjects cannot be recorded by a client; nothing of the batch is stored.
func TestReservedNamesAreRefused(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		edit  func(*domain.AuditEventDraft)
		field string
	}{
		{func(d *domain.AuditEventDraft) { d.Action = "audit.events.purged" }, "events[1].action"},
		{func(d *domain.AuditEventDraft) { d.Action = "webhook.destination.created" }, "events[1].action"},
		{func(d *domain.AuditEventDraft) { d.Action = "export.requested" }, "events[1].action"},
		{func(d *domain.AuditEventDraft) { d.Action = "retention.anything" }, "events[1].action"},
		{func(d *domain.AuditEventDraft) {
			d.Subject = domain.Subject{Type: domain.SubjectSystem, ID: "system:retention"}
		}, "events[1].subject.id"},
	} {
		bad := draft("p1", "device.updated")
		tc.edit(&bad)
		_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{
			Events: []domain.AuditEventDraft{draft("p1", "device.updated"), bad}})
		requireCode(t, err, app.CodeBadUserInput)
		require.Equal(t, tc.field, app.ErrorOf(err).Field)
		require.Zero(t, countEvents(t, b.pool))
	}
}

// TestFilterByRecorderAndCorrelation: recordedBySubject and the correlation
// ids filter searches exactly.
func TestFilterByRecorderAndCorrelation(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	gw := b.writer
	gw.Subject = "gateway"
	mk := func(trace, request, cause string) domain.AuditEventDraft {
		d := draft("p1", "device.updated")
		d.Correlation = &domain.Correlation{TraceID: trace, RequestID: request, CausationID: cause}
		return d
	}
	_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
		mk("0af7651916cd43dd8448eb211c80319c", "r1", "c1"), mk("", "r2", "c1"), draft("p1", "device.updated")}})
	require.NoError(t, err)
	_, err = b.app.RecordAuditEvents(ctx, gw, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
		mk("0af7651916cd43dd8448eb211c80319c", "r3", "")}})
	require.NoError(t, err)

	seqs := func(f app.AuditEventFilterInput) []uint64 {
		page, err := b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1", Filter: f})
		require.NoError(t, err)
		var out []uint64
		for _, e := range page.Edges {
			out = append(out, e.Event.Sequence)
		}
		return out
	}
	require.Equal(t, []uint64{4}, seqs(app.AuditEventFilterInput{RecordedBySubject: "gateway"}))
	require.Equal(t, []uint64{1, 2, 3}, seqs(app.AuditEventFilterInput{RecordedBySubject: "svc"}))
	require.Equal(t, []uint64{1, 4}, seqs(app.AuditEventFilterInput{TraceID: "0af7651916cd43dd8448eb211c80319c"}))
	require.Equal(t, []uint64{2}, seqs(app.AuditEventFilterInput{RequestID: "r2"}))
	require.Equal(t, []uint64{1, 2}, seqs(app.AuditEventFilterInput{CausationID: "c1"}))
	require.Equal(t, []uint64{1}, seqs(app.AuditEventFilterInput{CausationID: "c1", RequestID: "r1"}))
	require.Empty(t, seqs(app.AuditEventFilterInput{RecordedBySubject: "gateway", CausationID: "c1"}))

	_, err = b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{RequestID: "bad\x00"}})
	requireCode(t, err, app.CodeBadUserInput)
	require.Equal(t, "filter.correlation.requestId", app.ErrorOf(err).Field)
}

// TestChainCrossesTheVersionBoundary: events stored under encoding v1 (as
// the service wrote them before recordedBy existed) followed by v2 events
// verify as one chain, and tampering with a recorder is detected.
func TestChainCrossesTheVersionBoundary(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	events := recordN(t, b, "p1", 3)
	// Rewrite the first three as the previous version stored them: no
	// recorder, version 1, their hashes over the v1 bytes.
	prev := domain.Hash{}
	for _, e := range events {
		e.ChainVersion, e.RecordedBy = domain.ChainVersionOriginal, nil
		e.ChainHash = e.ComputeChainHash(prev)
		prev = e.ChainHash
		tamper(t, b, "p1", int(e.Sequence), "chain_version = 1, recorded_by_issuer = '', recorded_by_subject = '', "+
			"recorded_by_token_id = '', recorded_by_client_id = '', chain_hash = decode('"+e.ChainHash.String()+"', 'hex')")
	}
	_, err := b.pool.Exec(ctx, "UPDATE audit_project_heads SET last_hash = $1 WHERE tenant_id = 't1' AND project_id = 'p1'", prev[:])
	require.NoError(t, err)

	later := recordN(t, b, "p1", 2)
	require.Equal(t, domain.ChainVersionRecordedBy, later[0].ChainVersion)
	require.Equal(t, later[0].ChainHash, later[0].ComputeChainHash(prev))

	v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid, "%+v", v)
	require.Equal(t, uint64(5), v.CheckedCount)

	old, err := b.app.GetAuditEvent(ctx, b.reader, "p1", events[0].ID.String())
	require.NoError(t, err)
	require.Nil(t, old.RecordedBy)
	require.Equal(t, domain.ChainVersionOriginal, old.ChainVersion)

	tamper(t, b, "p1", 5, "recorded_by_subject = 'someone-else'")
	v, err = b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	require.False(t, v.Valid)
	require.Equal(t, uint64(5), *v.FirstInvalidSequence)
}
