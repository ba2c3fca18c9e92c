package checkpoint

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func testPayload(prev *[32]byte) Payload {
	return NewPayload(Fields{TenantID: "t1", ProjectID: "p1", Sequence: 42, ChainHash: sha256.Sum256([]byte("x")),
		PurgedThrough: 7, AnchorHash: sha256.Sum256([]byte("a")), Previous: prev,
		IssuedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)})
}

func mustRing(t *testing.T, retired ...ed25519.PublicKey) *KeyRing {
	t.Helper()
	priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewKeyRing(priv, retired...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSignVerifyRoundTrip(t *testing.T) {
	r := mustRing(t)
	prev := Digest("earlier")
	p := testPayload(&prev)
	jws, err := r.Sign(p)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		t.Fatalf("not compact: %q", jws)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if want := `{"alg":"EdDSA","kid":"` + r.KeyID() + `","typ":"aether-checkpoint+jws"}`; string(header) != want {
		t.Fatalf("header %s, want %s", header, want)
	}
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	wantBody := `{"v":1,"tenantId":"t1","projectId":"p1","sequence":"42","chainHash":"` + p.ChainHash +
		`","purgedThroughSequence":"7","anchorHash":"` + p.AnchorHash + `","previousCheckpoint":"` + hex.EncodeToString(prev[:]) +
		`","issuedAt":"2026-12-01T10:00:00Z"}`
	if string(body) != wantBody {
		t.Fatalf("payload\n%s\nwant\n%s", body, wantBody)
	}
	got, kid, err := r.Verify(jws)
	if err != nil || kid != r.KeyID() || got.Sequence != "42" || *got.PreviousCheckpoint != hex.EncodeToString(prev[:]) {
		t.Fatalf("verify: %+v %q %v", got, kid, err)
	}
	// The signature is plain Ed25519 over "header.payload" (RFC 8037).
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	pub, _ := r.PublicKey(r.KeyID())
	if !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatal("the signature is not Ed25519 over the signing input")
	}
	// The first checkpoint's previousCheckpoint is null.
	first, _ := r.Sign(testPayload(nil))
	fp, _, err := r.Verify(first)
	if err != nil || fp.PreviousCheckpoint != nil || !strings.Contains(decodePart(first, 1), `"previousCheckpoint":null`) {
		t.Fatalf("first: %+v %v", fp, err)
	}
}

func decodePart(jws string, i int) string {
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(jws, ".")[i])
	return string(b)
}

func TestKeyID(t *testing.T) {
	pub := make(ed25519.PublicKey, 32)
	sum := sha256.Sum256(pub)
	if got := KeyID(pub); got != hex.EncodeToString(sum[:])[:16] {
		t.Fatalf("KeyID = %s", got)
	}
}

func TestJWKSVerifiesWithGoJose(t *testing.T) {
	old := mustRing(t)
	oldPub, _ := old.PublicKey(old.KeyID())
	r := mustRing(t, oldPub)
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 || set.Keys[0].KeyID != r.KeyID() || set.Keys[1].KeyID != old.KeyID() {
		t.Fatalf("keys: %+v", set.Keys)
	}
	var raw struct {
		Keys []map[string]string `json:"keys"`
	}
	_ = json.Unmarshal(r.JWKS(), &raw)
	for _, k := range raw.Keys {
		if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["use"] != "sig" || k["alg"] != "EdDSA" || len(k) != 6 {
			t.Fatalf("member shape: %v", k)
		}
		x, _ := base64.RawURLEncoding.DecodeString(k["x"])
		if KeyID(x) != k["kid"] {
			t.Fatalf("kid %s is not the id of x", k["kid"])
		}
	}
	// Any JOSE library: go-jose picks the key by kid from the JWKS and verifies.
	for _, signer := range []*KeyRing{r, old} {
		jws, _ := signer.Sign(testPayload(nil))
		obj, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			t.Fatal(err)
		}
		keys := set.Key(obj.Signatures[0].Header.KeyID)
		if len(keys) != 1 {
			t.Fatalf("kid %q not in the JWKS", obj.Signatures[0].Header.KeyID)
		}
		if _, err := obj.Verify(keys[0]); err != nil {
			t.Fatalf("go-jose: %v", err)
		}
	}
	// ParseJWKS reads it back.
	pubs, err := ParseJWKS(r.JWKS())
	if err != nil || len(pubs) != 2 {
		t.Fatalf("ParseJWKS: %v %v", pubs, err)
	}
}

func TestVerifyRefusesForgedAlteredAndUnknown(t *testing.T) {
	r := mustRing(t)
	jws, _ := r.Sign(testPayload(nil))
	parts := strings.Split(jws, ".")

	// Altered payload, signature kept.
	p := testPayload(nil)
	p.Sequence = "43"
	body, _ := json.Marshal(p)
	altered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(body) + "." + parts[2]
	if _, _, err := r.Verify(altered); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("altered: %v", err)
	}
	// Forged: another key, claiming the ring's kid.
	other, _ := GenerateKey()
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + r.KeyID() + `","typ":"aether-checkpoint+jws"}`))
	input := header + "." + parts[1]
	forged := input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(other, []byte(input)))
	if _, _, err := r.Verify(forged); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("forged: %v", err)
	}
	// Unknown kid: signed by a key the ring does not hold.
	stranger := mustRing(t)
	sj, _ := stranger.Sign(testPayload(nil))
	if _, kid, err := r.Verify(sj); !errors.Is(err, ErrUnknownKey) || kid != stranger.KeyID() {
		t.Fatalf("unknown kid: %q %v", kid, err)
	}
	// Another algorithm, or garbage.
	for _, bad := range []string{"", "a.b.c", strings.Replace(jws, parts[0], base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)), 1)} {
		if _, _, err := r.Verify(bad); err == nil {
			t.Fatalf("%q verified", bad)
		}
	}
}

func TestRetiredKeyStillVerifies(t *testing.T) {
	oldPriv, _ := GenerateKey()
	old, _ := NewKeyRing(oldPriv)
	jws, _ := old.Sign(testPayload(nil))

	newPriv, _ := GenerateKey()
	rotated, err := NewKeyRing(newPriv, oldPriv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.KeyID() == old.KeyID() {
		t.Fatal("same id after rotation")
	}
	if _, kid, err := rotated.Verify(jws); err != nil || kid != old.KeyID() {
		t.Fatalf("retired key: %q %v", kid, err)
	}
	fresh, _ := rotated.Sign(testPayload(nil))
	if _, kid, _ := Parse(fresh); kid != rotated.KeyID() {
		t.Fatal("new checkpoints must be signed with the current key")
	}
	// Without the retired key, the old checkpoint is from an unknown key.
	alone, _ := NewKeyRing(newPriv)
	if _, _, err := alone.Verify(jws); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("without retired key: %v", err)
	}
}

func TestParseKeys(t *testing.T) {
	priv, _ := GenerateKey()
	pub := priv.Public().(ed25519.PublicKey)
	pemPriv, _ := MarshalPrivateKey(priv)
	seed := priv.Seed()
	for name, in := range map[string]string{
		"pem": string(pemPriv), "hex seed": hex.EncodeToString(seed) + "\n",
		"base64url seed": base64.RawURLEncoding.EncodeToString(seed), "base64 full": base64.StdEncoding.EncodeToString(priv),
	} {
		got, err := ParsePrivateKey([]byte(in))
		if err != nil || !got.Equal(priv) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := ParsePrivateKey([]byte("not a key")); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Fatalf("bad key: %v", err)
	}
	pemPub, _ := MarshalPublicKey(pub)
	r, _ := NewKeyRing(priv)
	for name, in := range map[string][]byte{"pem": pemPub, "jwks": r.JWKS(), "hex": []byte(hex.EncodeToString(pub)), "pem private": pemPriv} {
		got, err := ParsePublicKeys(in)
		if err != nil || len(got) != 1 || !got[0].Equal(pub) {
			t.Fatalf("%s: %v %v", name, got, err)
		}
	}
}
