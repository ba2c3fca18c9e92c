package app_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/store"
)

// newRing is a fresh checkpoint key ring verifying also retired.
func newRing(t *testing.T, retired ...ed25519.PublicKey) *checkpoint.KeyRing {
	t.Helper()
	key, err := checkpoint.GenerateKey()
	require.NoError(t, err)
	ring, err := checkpoint.NewKeyRing(key, retired...)
	require.NoError(t, err)
	return ring
}

// countingObserver counts checkpoint signings by outcome.
type countingObserver struct {
	mu       sync.Mutex
	outcomes map[string]int
}

func (o *countingObserver) WebhookAttempt(string, time.Duration)                {}
func (o *countingObserver) DataExportRun(string, string, time.Duration, uint64) {}
func (o *countingObserver) CheckpointSigned(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes[outcome]++
}

func (o *countingObserver) count(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[outcome]
}

// setupCheckpoints is setup with a key ring, an observer and admin, an
// identity with admin (but not audit:write).
func setupCheckpoints(t *testing.T) (*testBundle, *checkpoint.KeyRing, *countingObserver) {
	t.Helper()
	b := setup(t)
	ring := newRing(t)
	obs := &countingObserver{outcomes: map[string]int{}}
	b.app = app.New(store.New(b.pool), app.Config{Checkpoints: ring, Observer: obs, Logger: slog.New(slog.DiscardHandler)})
	return b, ring, obs
}

// verified verifies a checkpoint's JWS with ring and returns its fields.
func verified(t *testing.T, ring *checkpoint.KeyRing, jws string) checkpoint.Fields {
	t.Helper()
	p, kid, err := ring.Verify(jws)
	require.NoError(t, err)
	require.Equal(t, ring.KeyID(), kid)
	f, err := p.Fields()
	require.NoError(t, err)
	return f
}

func TestPeriodicSignerSignsProjectsWithNewEventsAndLinksThem(t *testing.T) {
	b, ring, obs := setupCheckpoints(t)
	ctx := context.Background()
	p1 := recordN(t, b, "p1", 3)
	p2 := recordN(t, b, "p2", 2)

	n, err := b.app.SignDueCheckpoints(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	first, err := b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Len(t, first.Items, 1)
	c1 := first.Items[0]
	require.Equal(t, uint64(3), c1.Sequence)
	require.Equal(t, p1[2].ChainHash, c1.ChainHash)
	require.Nil(t, c1.PreviousCheckpoint, "the project's first checkpoint links to nothing")
	f := verified(t, ring, c1.JWS)
	require.Equal(t, checkpoint.Fields{TenantID: "t1", ProjectID: "p1", Sequence: 3, ChainHash: p1[2].ChainHash, IssuedAt: f.IssuedAt}, f)
	require.Equal(t, ring.KeyID(), c1.KeyID)

	// Nothing new: nothing signed.
	n, err = b.app.SignDueCheckpoints(ctx, 100)
	require.NoError(t, err)
	require.Zero(t, n)

	// Only p1 has new events: only p1 gets a checkpoint, linked to its first.
	more := recordN(t, b, "p1", 2)
	n, err = b.app.SignDueCheckpoints(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	page, err := b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	c2 := page.Items[1]
	require.Equal(t, uint64(5), c2.Sequence)
	require.Equal(t, more[1].ChainHash, c2.ChainHash)
	f2 := verified(t, ring, c2.JWS)
	require.NotNil(t, f2.Previous)
	require.Equal(t, checkpoint.Digest(c1.JWS), *f2.Previous, "previousCheckpoint is the SHA-256 of the previous JWS")
	require.Equal(t, domain.Hash(checkpoint.Digest(c1.JWS)), *c2.PreviousCheckpoint)

	p2page, err := b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p2"})
	require.NoError(t, err)
	require.Len(t, p2page.Items, 1)
	require.Equal(t, p2[1].ChainHash, p2page.Items[0].ChainHash)
	require.Equal(t, 3, obs.count(app.CheckpointOutcomeSigned))

	// Paging by cursor.
	one := 1
	pg, err := b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p1", First: &one})
	require.NoError(t, err)
	require.True(t, pg.HasNextPage)
	pg, err = b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p1", First: &one, After: app.CheckpointCursor(&pg.Items[0])})
	require.NoError(t, err)
	require.False(t, pg.HasNextPage)
	require.Equal(t, uint64(5), pg.Items[0].Sequence)
	_, err = b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p1", After: "5"})
	requireCode(t, err, app.CodeBadUserInput)
	_, err = b.app.AuditCheckpoints(ctx, b.writer, app.AuditCheckpointsInput{ProjectID: "p1"})
	requireCode(t, err, app.CodeForbidden)
}

func TestCreateAuditCheckpoint(t *testing.T) {
	b, ring, _ := setupCheckpoints(t)
	ctx := context.Background()
	events := recordN(t, b, "p1", 4)

	c, err := b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
	require.NoError(t, err)
	require.Equal(t, uint64(4), c.Sequence)
	require.Equal(t, events[3].ChainHash, domain.Hash(verified(t, ring, c.JWS).ChainHash))
	require.Equal(t, 4, countEvents(t, b.pool), "a checkpoint records no audit event")

	// At the same head: the same checkpoint.
	admin := app.Identity{Subject: "root", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAdmin}}
	again, err := b.app.CreateAuditCheckpoint(ctx, admin, "p1")
	require.NoError(t, err, "admin may sign too")
	require.Equal(t, c.JWS, again.JWS)
	require.Equal(t, 1, countRows(t, b.pool, "audit_checkpoints"))

	_, err = b.app.CreateAuditCheckpoint(ctx, b.reader, "p1")
	requireCode(t, err, app.CodeForbidden)
	_, err = b.app.CreateAuditCheckpoint(ctx, b.writer, "p3") // outside the token
	requireCode(t, err, app.CodeNotFound)
	_, err = b.app.CreateAuditCheckpoint(ctx, b.writer, "p2") // no events
	requireCode(t, err, app.CodeNotFound)
	other := app.Identity{Subject: "x", TenantID: "t2", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	_, err = b.app.CreateAuditCheckpoint(ctx, other, "p1") // another tenant's project looks missing
	requireCode(t, err, app.CodeNotFound)
	page, err := b.app.AuditCheckpoints(ctx, app.Identity{Subject: "x", TenantID: "t2", ProjectIDs: []string{app.AllProjects},
		Permissions: []app.Permission{app.PermissionAuditRead}}, app.AuditCheckpointsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Empty(t, page.Items, "another tenant sees none of t1's checkpoints")

	// Without a key, checkpoints are off.
	off := app.New(store.New(b.pool), app.Config{})
	_, err = off.CreateAuditCheckpoint(ctx, b.writer, "p1")
	requireCode(t, err, app.CodeInvalidState)

	// The table is append-only.
	_, err = b.pool.Exec(ctx, "UPDATE audit_checkpoints SET key_id = 'x'")
	require.ErrorContains(t, err, "audit_checkpoints is append-only: UPDATE is not allowed")
	_, err = b.pool.Exec(ctx, "DELETE FROM audit_checkpoints")
	require.ErrorContains(t, err, "append-only: DELETE")
	_, err = b.pool.Exec(ctx, "TRUNCATE audit_checkpoints")
	require.ErrorContains(t, err, "append-only: TRUNCATE")
}

func TestSignerRefusesABrokenChain(t *testing.T) {
	b, _, obs := setupCheckpoints(t)
	ctx := context.Background()
	recordN(t, b, "p1", 3)
	recordN(t, b, "p2", 2)
	tamper(t, b, "p1", 2, "outcome = 'FAILURE'")

	_, err := b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
	requireCode(t, err, app.CodeInvalidState)
	require.ErrorIs(t, err, app.ErrChainDoesNotRecompute)
	require.Equal(t, 1, obs.count(app.CheckpointOutcomeRefused))

	// The periodic signer refuses p1 and still signs p2.
	n, err := b.app.SignDueCheckpoints(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, obs.count(app.CheckpointOutcomeRefused))
	page, err := b.app.AuditCheckpoints(ctx, b.reader, app.AuditCheckpointsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Empty(t, page.Items, "no checkpoint of the broken chain")
}

// rewriteChain changes event seq of project p1 and recomputes every hash
// of the project and its head consistently, as a database superuser could:
// the events alone then verify.
func rewriteChain(t *testing.T, b *testBundle, seq uint64) {
	t.Helper()
	ctx := context.Background()
	head, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
	require.NoError(t, err)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
	require.NoError(t, err)
	var prev domain.Hash
	for s := uint64(1); s <= head.HeadSequence; s++ {
		e, err := store.New(b.pool).GetAuditEventBySequence(ctx, "t1", "p1", s)
		require.NoError(t, err)
		if s == seq {
			e.Outcome = domain.OutcomeDenied
		}
		e.ChainHash = e.ComputeChainHash(prev)
		prev = e.ChainHash
		_, err = tx.Exec(ctx, "UPDATE audit_events SET outcome = $1, chain_hash = $2 WHERE tenant_id = 't1' AND project_id = 'p1' AND sequence = $3",
			string(e.Outcome), e.ChainHash[:], s)
		require.NoError(t, err)
	}
	_, err = tx.Exec(ctx, "UPDATE audit_project_heads SET last_hash = $1 WHERE tenant_id = 't1' AND project_id = 'p1'", prev[:])
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func TestVerifyAuditChainChecksCheckpoints(t *testing.T) {
	t.Run("ConsistentRewrite", func(t *testing.T) {
		b, _, _ := setupCheckpoints(t)
		ctx := context.Background()
		recordN(t, b, "p1", 3)
		_, err := b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
		require.NoError(t, err)
		recordN(t, b, "p1", 3)
		_, err = b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
		require.NoError(t, err)

		v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
		require.NoError(t, err)
		require.True(t, v.Valid)
		require.Equal(t, uint64(2), v.CheckpointsChecked)
		require.Nil(t, v.FirstInvalidCheckpointSequence)

		rewriteChain(t, b, 5)
		v, err = b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
		require.NoError(t, err)
		require.Nil(t, v.FirstInvalidSequence, "every event recomputes to its (rewritten) hash")
		require.Equal(t, uint64(6), v.CheckedCount)
		require.False(t, v.Valid, "the checkpoint exposes the rewrite")
		require.Equal(t, uint64(1), v.CheckpointsChecked, "the checkpoint at 3 still holds")
		require.NotNil(t, v.FirstInvalidCheckpointSequence)
		require.Equal(t, uint64(6), *v.FirstInvalidCheckpointSequence)

		// And the signer refuses to certify the rewritten chain.
		recordN(t, b, "p1", 1)
		_, err = b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
		require.ErrorIs(t, err, app.ErrChainDoesNotRecompute)
	})

	t.Run("ForgedAlteredUnknownAndRetired", func(t *testing.T) {
		b, ring, _ := setupCheckpoints(t)
		ctx := context.Background()
		recordN(t, b, "p1", 2)
		c1, err := b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
		require.NoError(t, err)

		// After a rotation, the retired key still verifies the old checkpoint.
		oldPub, _ := ring.PublicKey(ring.KeyID())
		rotated := newRing(t, oldPub)
		b.app = app.New(store.New(b.pool), app.Config{Checkpoints: rotated})
		recordN(t, b, "p1", 1)
		c2, err := b.app.CreateAuditCheckpoint(ctx, b.writer, "p1")
		require.NoError(t, err)
		require.Equal(t, rotated.KeyID(), c2.KeyID)
		v, err := b.app.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
		require.NoError(t, err)
		require.True(t, v.Valid)
		require.Equal(t, uint64(2), v.CheckpointsChecked)

		// Without the retired key, the old checkpoint is from an unknown kid.
		alone := app.New(store.New(b.pool), app.Config{Checkpoints: newRing(t)})
		v, err = alone.VerifyAuditChain(ctx, b.reader, "p1", nil, nil)
		require.NoError(t, err)
		require.False(t, v.Valid)
		require.Equal(t, uint64(2), *v.FirstInvalidCheckpointSequence)

		// A checkpoint stored behind the service's back, whose payload
		// states exactly the recomputed chain: only its signature decides.
		stranger := newRing(t)
		for name, tc := range map[string]struct {
			sign  func(p checkpoint.Payload) string
			valid bool
		}{
			"control: signed by the key": {sign: func(p checkpoint.Payload) string { return mustSign(t, rotated, p) }, valid: true},
			"altered (signature of another payload kept)": {sign: func(p checkpoint.Payload) string {
				parts := strings.Split(c1.JWS, ".")
				body, _ := json.Marshal(p)
				return parts[0] + "." + b64(string(body)) + "." + parts[2]
			}},
			"forged (another key under the ring's kid)": {sign: func(p checkpoint.Payload) string { return forge(t, p, rotated.KeyID()) }},
			"unknown kid": {sign: func(p checkpoint.Payload) string { return mustSign(t, stranger, p) }},
		} {
			t.Run(name, func(t *testing.T) {
				b2, _, _ := setupCheckpoints(t)
				b2.app = app.New(store.New(b2.pool), app.Config{Checkpoints: rotated})
				evs := recordN(t, b2, "p1", 2)
				p := checkpoint.NewPayload(checkpoint.Fields{TenantID: "t1", ProjectID: "p1", Sequence: 2, ChainHash: evs[1].ChainHash,
					IssuedAt: evs[1].RecordedAt})
				insertCheckpointRow(t, b2, 2, evs[1].ChainHash, tc.sign(p))
				v, err := b2.app.VerifyAuditChain(ctx, b2.reader, "p1", nil, nil)
				require.NoError(t, err)
				require.Equal(t, tc.valid, v.Valid)
				if tc.valid {
					require.Equal(t, uint64(1), v.CheckpointsChecked)
					return
				}
				require.Nil(t, v.FirstInvalidSequence)
				require.Equal(t, uint64(2), *v.FirstInvalidCheckpointSequence)
			})
		}
	})
}

func mustSign(t *testing.T, ring *checkpoint.KeyRing, p checkpoint.Payload) string {
	t.Helper()
	jws, err := ring.Sign(p)
	require.NoError(t, err)
	return jws
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// forge signs p with a key the ring does not hold, naming kid.
func forge(t *testing.T, p checkpoint.Payload, kid string) string {
	t.Helper()
	key, err := checkpoint.GenerateKey()
	require.NoError(t, err)
	header := b64(`{"alg":"EdDSA","kid":"` + kid + `","typ":"aether-checkpoint+jws"}`)
	body, err := json.Marshal(p)
	require.NoError(t, err)
	input := header + "." + b64(string(body))
	return input + "." + b64(string(ed25519.Sign(key, []byte(input))))
}

// insertCheckpointRow stores a checkpoint row of p1 at seq as an attacker
// with database access could.
func insertCheckpointRow(t *testing.T, b *testBundle, seq uint64, hash domain.Hash, jws string) {
	t.Helper()
	d := checkpoint.Digest(jws)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO audit_checkpoints (tenant_id, project_id, sequence, issue_number,
		chain_hash, purged_through, anchor_hash, previous_checkpoint, jws_digest, key_id, jws, issued_at)
		VALUES ('t1', 'p1', $1, 1, $2, 0, $3, NULL, $4, 'x', $5, now())`, int64(seq), hash[:], make([]byte, 32), d[:], jws)
	require.NoError(t, err)
}

func TestCheckpointObjectIsWritten(t *testing.T) {
	b := setupExports(t, app.ExportConfig{})
	ctx := context.Background()
	ring := newRing(t)
	a := b.otherApp(func(c *app.Config) { c.Checkpoints = ring })
	_, err := a.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{draft("p2", "device.updated")}})
	require.NoError(t, err)
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	c, err := a.CreateAuditCheckpoint(ctx, writer, "p2")
	require.NoError(t, err)

	// The object's job was committed with the checkpoint.
	jobs := jobsAfter[jobargs.WriteCheckpointObjectArgs](t, b.pool, 0)
	require.Len(t, jobs, 1)
	require.Equal(t, jobargs.WriteCheckpointObjectArgs{TenantID: "t1", ProjectID: "p2", Sequence: 1}, jobs[0].Args)
	require.Empty(t, b.objects(t), "workers act only on committed jobs: nothing before the job runs")

	for range 2 { // a rerun is harmless
		require.NoError(t, a.WriteCheckpointObject(ctx, "t1", "p2", 1))
	}
	key := export.CheckpointKey("t1", "p2", 1)
	require.Equal(t, "checkpoints/t1/p2/1.jws", key)
	got, err := b.bucket.ReadAll(ctx, key)
	require.NoError(t, err)
	require.Equal(t, c.JWS, string(got))
	require.True(t, bytes.Equal(got, []byte(c.JWS)))
}
