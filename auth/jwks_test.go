package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/auth"
)

// Key generation is slow under -race; the keys are shared by the tests.
var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	rsaKey2  *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
)

func testKeys(t *testing.T) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		rsaKey, err = rsa.GenerateKey(rand.Reader, 2048)
		if err == nil {
			rsaKey2, err = rsa.GenerateKey(rand.Reader, 2048)
		}
		if err == nil {
			ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		}
		if err != nil {
			panic(err)
		}
	})
}

type publicKey struct {
	key any
	kid string
	alg jwkset.ALG
}

// jwksJSON returns the public JWK Set of keys.
func jwksJSON(t *testing.T, keys ...publicKey) []byte {
	t.Helper()
	store := jwkset.NewMemoryStorage()
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.key, jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: jwkset.UseSig},
		})
		require.NoError(t, err)
		require.NoError(t, store.KeyWrite(context.Background(), jwk))
	}
	raw, err := store.JSONPublic(context.Background())
	require.NoError(t, err)
	return raw
}

// jwksServer serves the JWK Set held in body and counts requests.
type jwksServer struct {
	*httptest.Server
	body     atomic.Pointer[[]byte]
	requests atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.body.Store(&body)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

// The issuer and audience of the test identity provider's tokens; a JWKS
// verifier requires both.
const (
	jwksIssuer   = "https://issuer.example"
	jwksAudience = "aether"
)

// newJWKSVerifier returns a verifier of the key set at url, for jwksIssuer
// and jwksAudience unless cfg names others.
func newJWKSVerifier(t *testing.T, url string, cfg auth.VerifierConfig) *auth.Verifier {
	t.Helper()
	cfg.JWKSURL = url
	if cfg.Issuer == "" {
		cfg.Issuer = jwksIssuer
	}
	if cfg.Audience == "" {
		cfg.Audience = jwksAudience
	}
	v, err := auth.NewVerifier(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	return v
}

// signWith signs claims, with jwksIssuer and jwksAudience when they name
// no issuer or audience of their own.
func signWith(t *testing.T, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"iss": jwksIssuer, "aud": jwksAudience}
	for k, v := range claims {
		c[k] = v
	}
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func standardJWKS(t *testing.T) []byte {
	testKeys(t)
	return jwksJSON(t,
		publicKey{&rsaKey.PublicKey, "rsa-1", jwkset.AlgRS256},
		publicKey{&ecKey.PublicKey, "ec-1", jwkset.AlgES256},
	)
}

func TestJWKSVerify(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{Issuer: "https://issuer.example", Audience: "aether"})

	c := validClaims()
	c["iss"] = "https://issuer.example"
	c["aud"] = []any{"aether"}

	for name, tok := range map[string]string{
		"RS256": signWith(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, c),
		"ES256": signWith(t, jwt.SigningMethodES256, "ec-1", ecKey, c),
		// Without "kid", every key of the set is tried.
		"RS256 without kid": signWith(t, jwt.SigningMethodRS256, "", rsaKey, c),
	} {
		t.Run(name, func(t *testing.T) {
			id, err := v.Verify(tok)
			require.NoError(t, err)
			require.Equal(t, "user-1", id.Subject)
			require.Equal(t, "tenant-1", id.TenantID)
			require.Equal(t, []string{"proj-a"}, id.ProjectIDs)
		})
	}

	t.Run("claims are checked as with HMAC", func(t *testing.T) {
		bad := validClaims()
		bad["iss"] = "https://issuer.example"
		bad["aud"] = "aether"
		delete(bad, "tenant_id")
		tok := signWith(t, jwt.SigningMethodES256, "ec-1", ecKey, bad)
		_, err := v.Verify(tok)
		requireInvalid(t, err, "token missing tenant_id", tok)

		bad["tenant_id"] = "tenant-1"
		bad["exp"] = time.Now().Add(-time.Hour).Unix()
		tok = signWith(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, bad)
		_, err = v.Verify(tok)
		require.ErrorIs(t, err, auth.ErrTokenExpired)
		requireInvalid(t, err, "token expired", tok)
	})
}

func TestJWKSRefusals(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{})

	pubDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	require.NoError(t, err)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	cases := []struct {
		name string
		tok  string
		msg  string
	}{
		{
			// Algorithm confusion: an HS256 token whose HMAC secret is
			// the verifier's public RSA key.
			"HS256 signed with the public key PEM",
			signWith(t, jwt.SigningMethodHS256, "rsa-1", pubPEM, validClaims()),
			"token algorithm not allowed",
		},
		{
			"HS256 signed with the public key DER",
			signWith(t, jwt.SigningMethodHS256, "rsa-1", pubDER, validClaims()),
			"token algorithm not allowed",
		},
		{
			"HS256 without kid",
			signWith(t, jwt.SigningMethodHS256, "", testSecret, validClaims()),
			"token algorithm not allowed",
		},
		{
			"alg none",
			signWith(t, jwt.SigningMethodNone, "rsa-1", jwt.UnsafeAllowNoneSignatureType, validClaims()),
			"token algorithm not allowed",
		},
		{
			"PS256 is not among the accepted algorithms",
			signWith(t, jwt.SigningMethodPS256, "rsa-1", rsaKey, validClaims()),
			"token algorithm not allowed",
		},
		{
			"unknown kid",
			signWith(t, jwt.SigningMethodRS256, "nobody", rsaKey, validClaims()),
			"token signing key unknown",
		},
		{
			"known kid, other key",
			signWith(t, jwt.SigningMethodRS256, "rsa-1", rsaKey2, validClaims()),
			"token signature invalid",
		},
		{
			"no kid, key not in set",
			signWith(t, jwt.SigningMethodRS256, "", rsaKey2, validClaims()),
			"token signature invalid",
		},
		{
			"kid of an RSA key on an ES256 token",
			signWith(t, jwt.SigningMethodES256, "rsa-1", ecKey, validClaims()),
			"token signing key unknown",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(tc.tok)
			requireInvalid(t, err, tc.msg, tc.tok)
		})
	}
}

func TestJWKSKeyRotation(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{})
	require.EqualValues(t, 1, srv.requests.Load(), "the set is fetched by NewVerifier")

	// The issuer starts signing with a new key and publishes it.
	rotated := jwksJSON(t,
		publicKey{&rsaKey.PublicKey, "rsa-1", jwkset.AlgRS256},
		publicKey{&rsaKey2.PublicKey, "rsa-2", jwkset.AlgRS256},
	)
	srv.body.Store(&rotated)

	tok := signWith(t, jwt.SigningMethodRS256, "rsa-2", rsaKey2, validClaims())
	_, err := v.Verify(tok)
	require.NoError(t, err, "an unknown kid triggers a refetch")
	require.EqualValues(t, 2, srv.requests.Load())

	_, err = v.Verify(tok)
	require.NoError(t, err)
	require.EqualValues(t, 2, srv.requests.Load(), "known keys are served from the cache")
}

func TestJWKSUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: srv.URL, Issuer: jwksIssuer, Audience: jwksAudience})
	require.Error(t, err)

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("not json"))
	}))
	defer bad.Close()
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: bad.URL, Issuer: jwksIssuer, Audience: jwksAudience})
	require.Error(t, err)

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: url, Issuer: jwksIssuer, Audience: jwksAudience})
	require.Error(t, err)
}

func TestJWKSLocalhostURLAllowed(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	// httptest listens on 127.0.0.1; name it "localhost" instead.
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	url := "http://" + net.JoinHostPort("localhost", port)
	v := newJWKSVerifier(t, url, auth.VerifierConfig{})
	_, err = v.Verify(signWith(t, jwt.SigningMethodES256, "ec-1", ecKey, validClaims()))
	require.NoError(t, err)
}

func TestJWKSVerifyAfterClose(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{})
	v.Close()
	v.Close()

	_, err := v.Verify(signWith(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, validClaims()))
	require.NoError(t, err, "cached keys keep working")

	_, err = v.Verify(signWith(t, jwt.SigningMethodRS256, "nobody", rsaKey, validClaims()))
	requireInvalid(t, err, "token signing key unknown", "")
}

func TestJWKSConcurrentVerify(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{})
	tok := signWith(t, jwt.SigningMethodES256, "ec-1", ecKey, validClaims())

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := v.Verify(tok)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// The test JWK Set is valid JSON with the expected members.
func TestJWKSFixture(t *testing.T) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(standardJWKS(t), &set))
	require.Len(t, set.Keys, 2)
	for _, k := range set.Keys {
		require.NotContains(t, k, "d", "only public keys are served")
	}
}

// TestJWKSUnknownKIDRefreshedOncePerMinute: a token naming a key id the set
// does not hold makes the verifier fetch the set again, but only once per
// minute; other such tokens are refused at once, with no request to the
// identity provider, while known keys keep working.
func TestJWKSUnknownKIDRefreshedOncePerMinute(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{})
	require.EqualValues(t, 1, srv.requests.Load(), "the set is fetched by NewVerifier")

	first := signWith(t, jwt.SigningMethodRS256, "made-up-1", rsaKey, validClaims())
	_, err := v.Verify(first)
	requireInvalid(t, err, "token signing key unknown", first)
	require.EqualValues(t, 2, srv.requests.Load(), "the first unknown kid refetches the set")

	for i := range 20 {
		tok := signWith(t, jwt.SigningMethodRS256, fmt.Sprintf("made-up-%d", i+2), rsaKey, validClaims())
		start := time.Now()
		_, err := v.Verify(tok)
		requireInvalid(t, err, "token signing key unknown", tok)
		require.Less(t, time.Since(start), time.Second, "refused at once")
	}
	require.EqualValues(t, 2, srv.requests.Load(), "no further fetch within the minute")

	_, err = v.Verify(signWith(t, jwt.SigningMethodES256, "ec-1", ecKey, validClaims()))
	require.NoError(t, err, "known keys keep working")
}

// TestJWKSRequiresIssuerAndAudience: a JWKS verifier without an issuer or
// an audience would accept the identity provider's tokens for any service.
func TestJWKSRequiresIssuerAndAudience(t *testing.T) {
	srv := newJWKSServer(t, standardJWKS(t))
	for name, cfg := range map[string]auth.VerifierConfig{
		"neither":     {JWKSURL: srv.URL},
		"no issuer":   {JWKSURL: srv.URL, Audience: jwksAudience},
		"no audience": {JWKSURL: srv.URL, Issuer: jwksIssuer},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := auth.NewVerifier(context.Background(), cfg)
			require.ErrorContains(t, err, "needs Issuer and Audience")
			require.Nil(t, v)
		})
	}
	v := newJWKSVerifier(t, srv.URL, auth.VerifierConfig{})
	for name, c := range map[string]jwt.MapClaims{
		"other audience": {"aud": "other-app"},
		"other issuer":   {"iss": "evil"},
	} {
		claims := validClaims()
		for k, val := range c {
			claims[k] = val
		}
		tok := signWith(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, claims)
		_, err := v.Verify(tok)
		require.Error(t, err, name)
	}
}
