package verify_test

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// The test exports are built the way the service builds them: drafts
// normalized and sealed with domain.ChainHead.Append, each event encoded
// with eventjson.Append, one a line.

const (
	testTenant  = "acme"
	testProject = "plant-1"
)

var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// trickyDetails are details whose canonical form a verifier gets wrong by
// going through floating point, UTF-16 key order, HTML escaping or the
// first of repeated keys.
var trickyDetails = []string{
	`{"price": 1.50, "hundred": 1e2, "negZero": -0.0, "big": 12345678901234567890, "neg": -12.5E-3}`,
	`{"html": "<script>alert('&')</script>", "sep": "a\u2028b\u2029c", "ctl": "tab\tnl\nbell\u0007del\u007f"}`,
	`{"dup": 1, "dup": {"inner": 2, "inner": [3, 1.0]}, "z": null}`,
	"{\"\uFF61\": \"halfwidth\", \"\U0001F600\": \"emoji\", \"\u00e9\": \"e-acute\", \"a\": true, \"A\": false}",
	`{"nested": {"b": [{"y": 1, "x": 2}], "a": "\/slash \\ backslash \" quote"}, "surrogate": "\ud83d\ude00 \ud800 lone"}`,
	`{"empty": {}, "arr": [], "s": "", "unicode": "日本語 ünïcödé"}`,
}

// draft returns the i-th test draft, normalized.
func draft(t testing.TB, i int) domain.AuditEventDraft {
	d := domain.AuditEventDraft{
		ID:         uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(i))),
		ProjectID:  testProject,
		Action:     "device.firmware.updated",
		OccurredAt: testNow.Add(-time.Duration(i+1) * time.Second).Add(time.Duration(i%7) * 1000 * time.Nanosecond),
		Subject:    domain.Subject{Type: domain.SubjectUser, ID: "u-" + strconv.Itoa(i%13), DisplayName: "Ada <Lovelace> & co"},
		Resource:   domain.Resource{Type: "device", ID: "dev-" + strconv.Itoa(i)},
		Outcome:    domain.OutcomeSuccess,
		Details:    json.RawMessage(trickyDetails[i%len(trickyDetails)]),
	}
	if i%3 == 0 {
		d.Governance = &domain.Governance{Reason: "maintenance window", Ticket: "CHG-" + strconv.Itoa(i)}
	}
	if i%4 == 1 {
		d.Correlation = &domain.Correlation{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RequestID: "req-" + strconv.Itoa(i)}
	}
	if i%5 == 2 {
		d.EvidenceDigests = []domain.EvidenceDigest{{Algorithm: "sha256", Value: "ab12", Label: "firmware"}}
	}
	require.NoError(t, d.Normalize("", testNow))
	return d
}

// sealChain returns a chain of v1 events followed by v2 events, sequences
// 1 to v1+v2: v1 events are as the service stored them before version 2
// (ChainVersion 1, no recordedBy), their hashes recomputed.
func sealChain(t testing.TB, v1, v2 int) []domain.AuditEvent {
	var drafts []domain.AuditEventDraft
	for i := range v1 + v2 {
		drafts = append(drafts, draft(t, i))
	}
	events, _ := domain.ChainHead{}.Append(testTenant, drafts[:v1], testNow)
	prev := domain.Hash{}
	for i := range events {
		events[i].ChainVersion = domain.ChainVersionOriginal
		events[i].RecordedBy = nil
		events[i].ChainHash = events[i].ComputeChainHash(prev)
		prev = events[i].ChainHash
	}
	for i := range drafts[v1:] {
		drafts[v1+i].RecordedBy = &domain.Recorder{Issuer: "https://idp.example", Subject: "svc-" + strconv.Itoa(i%3),
			TokenID: "jti-" + strconv.Itoa(i), ClientID: "client-1"}
	}
	more, _ := domain.ChainHead{Sequence: uint64(v1), Hash: prev}.Append(testTenant, drafts[v1:], testNow.Add(time.Second))
	events = append(events, more...)
	// The export shows times in whatever zone the store returned them in;
	// the canonical encoding is UTC either way.
	for i := range events {
		if i%2 == 1 {
			events[i].OccurredAt = events[i].OccurredAt.In(time.FixedZone("IST", 5*3600+1800))
		}
	}
	return events
}

// exportLines encodes events as export lines, each with its "\n".
func exportLines(t testing.TB, events []domain.AuditEvent) [][]byte {
	out := make([][]byte, len(events))
	for i := range events {
		b, err := eventjson.Append(nil, &events[i])
		require.NoError(t, err)
		out[i] = append(b, '\n')
	}
	return out
}

// writeExport writes lines to a file in dir, gzipped when gz.
func writeExport(t testing.TB, dir, name string, lines [][]byte, gz bool) string {
	t.Helper()
	data := bytes.Join(lines, nil)
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err := zw.Write(data)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		data = buf.Bytes()
	}
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// signingKey is a checkpoint key of the tests.
type signingKey struct {
	priv ed25519.PrivateKey
	kid  string
}

// newSigningKey makes an Ed25519 key with the contract's key id: the first
// 16 hex digits of SHA-256 of the raw public key.
func newSigningKey(t testing.TB) signingKey {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	sum := sha256.Sum256(pub)
	return signingKey{priv: priv, kid: hex.EncodeToString(sum[:])[:16]}
}

// checkpointPayload is the contract's checkpoint payload.
type checkpointPayload struct {
	V                     int     `json:"v"`
	TenantID              string  `json:"tenantId"`
	ProjectID             string  `json:"projectId"`
	Sequence              string  `json:"sequence"`
	ChainHash             string  `json:"chainHash"`
	PurgedThroughSequence string  `json:"purgedThroughSequence"`
	AnchorHash            string  `json:"anchorHash"`
	PreviousCheckpoint    *string `json:"previousCheckpoint"`
	IssuedAt              string  `json:"issuedAt"`
}

// payloadAt is the payload of a checkpoint at event e, nothing purged.
func payloadAt(e domain.AuditEvent) checkpointPayload {
	return checkpointPayload{V: 1, TenantID: e.TenantID, ProjectID: e.ProjectID,
		Sequence: strconv.FormatUint(e.Sequence, 10), ChainHash: e.ChainHash.String(),
		PurgedThroughSequence: "0", AnchorHash: domain.Hash{}.String(),
		IssuedAt: testNow.Add(time.Hour).Format(time.RFC3339)}
}

// sign returns the compact JWS of payload signed by k with header kid (k's
// own when kid is "").
func sign(t testing.TB, k signingKey, kid string, payload checkpointPayload) string {
	if kid == "" {
		kid = k.kid
	}
	return signAs(t, k, kid, "aether-checkpoint+jws", payload)
}

// signTyped is sign with another JWS type header.
func signTyped(t testing.TB, k signingKey, typ string, payload checkpointPayload) string {
	return signAs(t, k, k.kid, typ, payload)
}

func signAs(t testing.TB, k signingKey, kid, typ string, payload checkpointPayload) string {
	body, err := json.Marshal(payload)
	require.NoError(t, err)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: k.priv},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)).WithHeader(jose.HeaderKey("kid"), kid))
	require.NoError(t, err)
	obj, err := signer.Sign(body)
	require.NoError(t, err)
	jws, err := obj.CompactSerialize()
	require.NoError(t, err)
	return jws
}

// jwks returns the JWKS document of the public keys, as the server's
// /.well-known/aether/checkpoint-keys serves it.
func jwks(t testing.TB, keys ...signingKey) []byte {
	set := jose.JSONWebKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Use: "sig", Algorithm: string(jose.EdDSA)})
	}
	b, err := json.Marshal(set)
	require.NoError(t, err)
	return b
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// jsonMarshal is json.Marshal.
func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
