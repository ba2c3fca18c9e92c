package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newHMACVerifier(t testing.TB, cfg auth.VerifierConfig) *auth.Verifier {
	t.Helper()
	cfg.HMACSecret = testSecret
	v, err := auth.NewVerifier(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	return v
}

func validRequest() auth.TokenRequest {
	return auth.TokenRequest{
		Subject:     "user-1",
		TenantID:    "tenant-1",
		ProjectIDs:  []string{"proj-a", "proj-b"},
		Permissions: []app.Permission{app.PermissionAuditRead, app.PermissionWebhooksWrite},
		TTL:         time.Hour,
	}
}

// validClaims returns the claims of a valid token as a map that tests can
// break one claim at a time.
func validClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"sub":         "user-1",
		"tenant_id":   "tenant-1",
		"project_ids": []any{"proj-a"},
		"permissions": []any{"audit:read"},
		"iat":         now.Unix(),
		"exp":         now.Add(time.Hour).Unix(),
	}
}

func signHS256(t testing.TB, secret []byte, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	require.NoError(t, err)
	return tok
}

// requireInvalid checks that err is a verification failure with message
// msg that does not contain the token.
func requireInvalid(t *testing.T, err error, msg, token string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	require.Equal(t, msg, err.Error())
	if token != "" {
		require.NotContains(t, err.Error(), token)
	}
}

func TestMintVerifyRoundTrip(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	now := time.Now()
	req := validRequest()

	tok, err := auth.MintHS256(testSecret, req, now)
	require.NoError(t, err)

	id, err := v.Verify(tok)
	require.NoError(t, err)
	_, err = uuid.Parse(id.TokenID)
	require.NoError(t, err, "a minted token has a jti")
	require.Equal(t, app.Identity{
		TokenID:     id.TokenID,
		Subject:     "user-1",
		TenantID:    "tenant-1",
		ProjectIDs:  []string{"proj-a", "proj-b"},
		Permissions: []app.Permission{app.PermissionAuditRead, app.PermissionWebhooksWrite},
		ExpiresAt:   now.Add(time.Hour).Truncate(time.Second).UTC(),
	}, id)
	require.True(t, id.HasPermission(app.PermissionAuditRead))
	require.True(t, id.CanAccessProject("proj-b"))
	require.False(t, id.CanAccessProject("proj-c"))
}

func TestVerifyAllProjectsAndUnknownPermissions(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	req := validRequest()
	req.ProjectIDs = []string{app.AllProjects}
	req.Permissions = []app.Permission{"future:thing", app.PermissionAdmin}

	tok, err := auth.MintHS256(testSecret, req, time.Now())
	require.NoError(t, err)
	id, err := v.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, []string{"*"}, id.ProjectIDs)
	require.Equal(t, []app.Permission{"future:thing", app.PermissionAdmin}, id.Permissions)
	require.True(t, id.CanAccessProject("anything"))
}

func TestVerifyWithoutPermissions(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	for name, perms := range map[string]any{"absent": nil, "null": "null", "empty": []any{}} {
		t.Run(name, func(t *testing.T) {
			c := validClaims()
			switch perms {
			case nil:
				delete(c, "permissions")
			case "null":
				c["permissions"] = nil
			default:
				c["permissions"] = perms
			}
			id, err := v.Verify(signHS256(t, testSecret, c))
			require.NoError(t, err)
			require.Empty(t, id.Permissions)
		})
	}
}

func TestVerifyExpired(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	tok, err := auth.MintHS256(testSecret, validRequest(), time.Now().Add(-2*time.Hour))
	require.NoError(t, err)

	_, err = v.Verify(tok)
	require.ErrorIs(t, err, auth.ErrTokenExpired)
	requireInvalid(t, err, "token expired", tok)
}

func TestVerifyLeeway(t *testing.T) {
	// Expired ten seconds ago.
	req := validRequest()
	req.TTL = time.Minute
	tok, err := auth.MintHS256(testSecret, req, time.Now().Add(-70*time.Second))
	require.NoError(t, err)

	_, err = newHMACVerifier(t, auth.VerifierConfig{}).Verify(tok)
	require.NoError(t, err, "within the default leeway")

	_, err = newHMACVerifier(t, auth.VerifierConfig{Leeway: time.Second}).Verify(tok)
	require.ErrorIs(t, err, auth.ErrTokenExpired)
}

func TestVerifyWrongSecret(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	tok, err := auth.MintHS256([]byte("another-secret-another-secret-xx"), validRequest(), time.Now())
	require.NoError(t, err)

	_, err = v.Verify(tok)
	requireInvalid(t, err, "token signature invalid", tok)
	require.NotErrorIs(t, err, auth.ErrTokenExpired)
}

func TestVerifyTamperedPayload(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	tok, err := auth.MintHS256(testSecret, validRequest(), time.Now())
	require.NoError(t, err)

	parts := strings.Split(tok, ".")
	c := validClaims()
	c["tenant_id"] = "someone-else"
	payload, err := json.Marshal(c)
	require.NoError(t, err)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)

	_, err = v.Verify(strings.Join(parts, "."))
	requireInvalid(t, err, "token signature invalid", tok)
}

func TestVerifyAlgNoneRefused(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})

	tok, err := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	_, err = v.Verify(tok)
	requireInvalid(t, err, "token algorithm not allowed", tok)

	// The same by hand, with a signature attached and other spellings.
	payload, err := json.Marshal(validClaims())
	require.NoError(t, err)
	body := base64.RawURLEncoding.EncodeToString(payload)
	for _, header := range []string{`{"alg":"none"}`, `{"alg":"None"}`, `{"alg":"NONE","typ":"JWT"}`, `{"typ":"JWT"}`, `{"alg":""}`} {
		h := base64.RawURLEncoding.EncodeToString([]byte(header))
		for _, sig := range []string{"", "c2ln"} {
			_, err = v.Verify(h + "." + body + "." + sig)
			requireInvalid(t, err, "token algorithm not allowed", "")
		}
	}
}

func TestVerifyOtherHMACAlgorithmsRefused(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodHS384, jwt.SigningMethodHS512} {
		tok, err := jwt.NewWithClaims(m, validClaims()).SignedString(testSecret)
		require.NoError(t, err)
		_, err = v.Verify(tok)
		requireInvalid(t, err, "token algorithm not allowed", tok)
	}
}

func TestVerifyMalformed(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	for _, tok := range []string{"abc", "a.b", "a.b.c", "!!!.???.###", "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln"} {
		_, err := v.Verify(tok)
		requireInvalid(t, err, "token malformed", "")
	}
	for _, tok := range []string{"", "   "} {
		_, err := v.Verify(tok)
		requireInvalid(t, err, "token missing", "")
	}
}

func TestVerifyClaimChecks(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	cases := []struct {
		name   string
		change func(jwt.MapClaims)
		msg    string
	}{
		{"missing sub", func(c jwt.MapClaims) { delete(c, "sub") }, "token missing sub"},
		{"blank sub", func(c jwt.MapClaims) { c["sub"] = "  " }, "token missing sub"},
		{"numeric sub", func(c jwt.MapClaims) { c["sub"] = 42 }, "token malformed"},
		{"missing tenant_id", func(c jwt.MapClaims) { delete(c, "tenant_id") }, "token missing tenant_id"},
		{"null tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = nil }, "token missing tenant_id"},
		{"empty tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = "" }, "token missing tenant_id"},
		{"blank tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = " \t" }, "token missing tenant_id"},
		{"numeric tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = 7 }, "token tenant_id is not a string"},
		{"NUL in tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = "acme\u0000" }, "token tenant_id must be an identifier without control characters or surrounding white space, at most 128 bytes"},
		{"padded tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = " acme" }, "token tenant_id must be an identifier without control characters or surrounding white space, at most 128 bytes"},
		{"long tenant_id", func(c jwt.MapClaims) { c["tenant_id"] = strings.Repeat("t", 129) }, "token tenant_id must be an identifier without control characters or surrounding white space, at most 128 bytes"},
		{"control character in sub", func(c jwt.MapClaims) { c["sub"] = "user\u0007" }, "token sub must be an identifier without control characters or surrounding white space, at most 256 bytes"},
		{"NUL in a project id", func(c jwt.MapClaims) { c["project_ids"] = []any{"proj-a", "p\u0000"} }, "token project_ids must be identifiers without control characters or surrounding white space, at most 128 bytes"},
		{"missing project_ids", func(c jwt.MapClaims) { delete(c, "project_ids") }, "token missing project_ids"},
		{"null project_ids", func(c jwt.MapClaims) { c["project_ids"] = nil }, "token missing project_ids"},
		{"empty project_ids", func(c jwt.MapClaims) { c["project_ids"] = []any{} }, "token missing project_ids"},
		{"string project_ids", func(c jwt.MapClaims) { c["project_ids"] = "proj-a" }, "token project_ids is not an array of non-blank strings"},
		{"blank project id", func(c jwt.MapClaims) { c["project_ids"] = []any{"proj-a", " "} }, "token project_ids is not an array of non-blank strings"},
		{"numeric project id", func(c jwt.MapClaims) { c["project_ids"] = []any{"proj-a", 3} }, "token project_ids is not an array of non-blank strings"},
		{"null project id", func(c jwt.MapClaims) { c["project_ids"] = []any{nil} }, "token project_ids is not an array of non-blank strings"},
		{"numeric permission", func(c jwt.MapClaims) { c["permissions"] = []any{"audit:read", 1} }, "token permissions is not an array of non-blank strings"},
		{"blank permission", func(c jwt.MapClaims) { c["permissions"] = []any{""} }, "token permissions is not an array of non-blank strings"},
		{"string permissions", func(c jwt.MapClaims) { c["permissions"] = "audit:read" }, "token permissions is not an array of non-blank strings"},
		{"missing exp", func(c jwt.MapClaims) { delete(c, "exp") }, "token missing exp"},
		{"null exp", func(c jwt.MapClaims) { c["exp"] = nil }, "token missing exp"},
		{"string exp", func(c jwt.MapClaims) { c["exp"] = "tomorrow" }, "token malformed"},
		{"nbf in the future", func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(10 * time.Minute).Unix() }, "token not valid yet"},
		{"iat in the future", func(c jwt.MapClaims) { c["iat"] = time.Now().Add(10 * time.Minute).Unix() }, "token issued in the future"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validClaims()
			tc.change(c)
			tok := signHS256(t, testSecret, c)
			_, err := v.Verify(tok)
			requireInvalid(t, err, tc.msg, tok)
			require.NotErrorIs(t, err, auth.ErrTokenExpired)
		})
	}
}

func TestVerifyNotBeforeWithinLeeway(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})
	c := validClaims()
	c["nbf"] = time.Now().Add(10 * time.Second).Unix()
	_, err := v.Verify(signHS256(t, testSecret, c))
	require.NoError(t, err)
}

func TestVerifyIssuerAndAudience(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{Issuer: "https://issuer.example", Audience: "aether"})
	cases := []claimCase{
		{"matching", func(c jwt.MapClaims) {}, ""},
		{"audience list containing ours", func(c jwt.MapClaims) { c["aud"] = []any{"other", "aether"} }, ""},
		{"wrong issuer", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }, "token issuer invalid"},
		{"missing issuer", func(c jwt.MapClaims) { delete(c, "iss") }, "token issuer invalid"},
		{"wrong audience", func(c jwt.MapClaims) { c["aud"] = "other" }, "token audience invalid"},
		{"missing audience", func(c jwt.MapClaims) { delete(c, "aud") }, "token audience invalid"},
		{"empty audience", func(c jwt.MapClaims) { c["aud"] = []any{} }, "token audience invalid"},
		{"wrong issuer and expired", func(c jwt.MapClaims) {
			c["iss"] = "https://evil.example"
			c["exp"] = time.Now().Add(-time.Hour).Unix()
		}, "token issuer invalid"},
	}
	runClaimCases(t, v, func(c jwt.MapClaims) {
		c["iss"] = "https://issuer.example"
		c["aud"] = "aether"
	}, cases)

	// A verifier without issuer and audience ignores both claims.
	c := validClaims()
	c["iss"] = "anyone"
	c["aud"] = "anything"
	_, err := newHMACVerifier(t, auth.VerifierConfig{}).Verify(signHS256(t, testSecret, c))
	require.NoError(t, err)

	// Minted tokens carry the requested issuer and audience.
	req := validRequest()
	req.Issuer = "https://issuer.example"
	req.Audience = "aether"
	tok, err := auth.MintHS256(testSecret, req, time.Now())
	require.NoError(t, err)
	_, err = v.Verify(tok)
	require.NoError(t, err)
}

func TestNewVerifierConfigErrors(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]auth.VerifierConfig{
		"neither":          {},
		"both":             {HMACSecret: testSecret, JWKSURL: "https://issuer.example/jwks.json"},
		"short secret":     {HMACSecret: []byte("too-short")},
		"negative leeway":  {HMACSecret: testSecret, Leeway: -time.Second},
		"negative max ttl": {HMACSecret: testSecret, MaxTTL: -time.Second},
		"plain http":       {JWKSURL: "http://issuer.example/jwks.json"},
		"no scheme":        {JWKSURL: "issuer.example/jwks.json"},
		"other scheme":     {JWKSURL: "file:///etc/jwks.json"},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := auth.NewVerifier(ctx, cfg)
			require.Error(t, err)
			require.Nil(t, v)
		})
	}
}

func TestVerifierKeepsOwnSecretCopy(t *testing.T) {
	secret := []byte(string(testSecret))
	v, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{HMACSecret: secret})
	require.NoError(t, err)
	defer v.Close()
	secret[0] ^= 0xff

	tok, err := auth.MintHS256(testSecret, validRequest(), time.Now())
	require.NoError(t, err)
	_, err = v.Verify(tok)
	require.NoError(t, err)
}

func TestMintHS256Validation(t *testing.T) {
	now := time.Now()
	_, err := auth.MintHS256([]byte("short"), validRequest(), now)
	require.Error(t, err)

	cases := map[string]func(*auth.TokenRequest){
		"blank subject":    func(r *auth.TokenRequest) { r.Subject = " " },
		"blank tenant":     func(r *auth.TokenRequest) { r.TenantID = "" },
		"no projects":      func(r *auth.TokenRequest) { r.ProjectIDs = nil },
		"blank project":    func(r *auth.TokenRequest) { r.ProjectIDs = []string{"a", ""} },
		"blank permission": func(r *auth.TokenRequest) { r.Permissions = []app.Permission{" "} },
		"zero ttl":         func(r *auth.TokenRequest) { r.TTL = 0 },
		"negative ttl":     func(r *auth.TokenRequest) { r.TTL = -time.Minute },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			req := validRequest()
			change(&req)
			tok, err := auth.MintHS256(testSecret, req, now)
			require.Error(t, err)
			require.Empty(t, tok)
		})
	}
}

func BenchmarkVerifyHS256(b *testing.B) {
	v := newHMACVerifier(b, auth.VerifierConfig{})
	tok, err := auth.MintHS256(testSecret, validRequest(), time.Now())
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifyCacheHonoursExpiry: a verified token is answered from the cache,
// yet stops being accepted once it expires.
func TestVerifyCacheHonoursExpiry(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{Leeway: time.Nanosecond})
	req := validRequest()
	req.TTL = 2 * time.Second
	// exp has whole-second precision: it falls 1-2 s from now.
	tok, err := auth.MintHS256(testSecret, req, time.Now().Truncate(time.Second))
	require.NoError(t, err)
	first, err := v.Verify(tok)
	require.NoError(t, err)
	again, err := v.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, first, again)

	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = v.Verify(tok)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.ErrorIs(t, err, auth.ErrTokenExpired)
}

// TestVerifyMaxTTL: with MaxTTL, a token must carry "iat" and live at most
// MaxTTL; without it, lifetimes are not bounded.
func TestVerifyMaxTTL(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{MaxTTL: 24 * time.Hour})
	now := time.Now()
	cases := []claimCase{
		{"an hour", func(c jwt.MapClaims) {}, ""},
		{"exactly the limit", func(c jwt.MapClaims) { c["exp"] = now.Add(24 * time.Hour).Unix() }, ""},
		{"a day and a minute", func(c jwt.MapClaims) { c["exp"] = now.Add(24*time.Hour + time.Minute).Unix() }, "token lifetime exceeds the limit of 24h0m0s"},
		{"the year 33658", func(c jwt.MapClaims) { c["exp"] = int64(1000000000000) }, "token lifetime exceeds the limit of 24h0m0s"},
		{"no iat", func(c jwt.MapClaims) { delete(c, "iat") }, "token missing iat"},
	}
	runClaimCases(t, v, func(c jwt.MapClaims) {
		c["iat"] = now.Unix()
		c["exp"] = now.Add(time.Hour).Unix()
	}, cases)

	long := validClaims()
	delete(long, "iat")
	long["exp"] = int64(1000000000000)
	_, err := newHMACVerifier(t, auth.VerifierConfig{}).Verify(signHS256(t, testSecret, long))
	require.NoError(t, err, "no bound without MaxTTL")
}

// claimCase is a change to valid claims and the refusal it earns ("":
// accepted).
type claimCase struct {
	name   string
	change func(jwt.MapClaims)
	msg    string
}

// runClaimCases signs valid claims, adjusted by base and then by each
// case's change, and requires v to accept or refuse them as the case says.
func runClaimCases(t *testing.T, v *auth.Verifier, base func(jwt.MapClaims), cases []claimCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validClaims()
			base(c)
			tc.change(c)
			tok := signHS256(t, testSecret, c)
			_, err := v.Verify(tok)
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			requireInvalid(t, err, tc.msg, tok)
		})
	}
}

// TestVerifyRecorderClaims: who records events comes from the token: iss,
// jti (or a digest of the token), azp or client_id; a token may not pass for
// one of the service's own "system:" identities.
func TestVerifyRecorderClaims(t *testing.T) {
	v := newHMACVerifier(t, auth.VerifierConfig{})

	c := validClaims()
	c["iss"], c["jti"], c["azp"], c["client_id"] = "https://idp.example", "tok-7", "dashboard", "ignored"
	id, err := v.Verify(signHS256(t, testSecret, c))
	require.NoError(t, err)
	require.Equal(t, "https://idp.example", id.Issuer)
	require.Equal(t, "tok-7", id.TokenID)
	require.Equal(t, "dashboard", id.ClientID)

	c = validClaims()
	c["client_id"] = "cli-2"
	tok := signHS256(t, testSecret, c)
	id, err = v.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "cli-2", id.ClientID)
	require.Empty(t, id.Issuer)
	sum := sha256.Sum256([]byte(tok))
	require.Equal(t, hex.EncodeToString(sum[:])[:16], id.TokenID, "without jti, the token's digest")

	for name, edit := range map[string]func(jwt.MapClaims){
		"system subject":   func(c jwt.MapClaims) { c["sub"] = "system:retention" },
		"azp not a string": func(c jwt.MapClaims) { c["azp"] = 7 },
		"client_id ctrl":   func(c jwt.MapClaims) { c["client_id"] = "a\x00b" },
		"jti ctrl":         func(c jwt.MapClaims) { c["jti"] = "a\nb" },
	} {
		c := validClaims()
		edit(c)
		_, err := v.Verify(signHS256(t, testSecret, c))
		require.ErrorIs(t, err, auth.ErrInvalidToken, name)
	}

	_, err = auth.MintHS256(testSecret, auth.TokenRequest{Subject: "system:x", TenantID: "t", ProjectIDs: []string{"p"}, TTL: time.Hour}, time.Now())
	require.Error(t, err)
}
