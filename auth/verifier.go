package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// DefaultLeeway is the clock skew tolerated when checking "exp", "nbf" and
// "iat" if [VerifierConfig.Leeway] is zero.
const DefaultLeeway = 30 * time.Second

// MinSecretLen is the minimum length in bytes of an HS256 secret, as
// required by RFC 7518 section 3.2 (a key at least as long as the hash).
const MinSecretLen = 32

// jwksHTTPTimeout bounds every request for the key set, including the first
// one made by [NewVerifier].
const jwksHTTPTimeout = 10 * time.Second

// jwksUnknownKIDRefresh is how often at most a token with a "kid" the key
// set does not hold makes the verifier fetch the set again (an identity
// provider that rotated its key). Between two fetches such tokens are
// refused at once, so that tokens with made-up key ids cost nothing and
// hold no request.
const jwksUnknownKIDRefresh = time.Minute

// hmacMethods and jwksMethods are the signing algorithms accepted for each
// key source.
var (
	hmacMethods = []string{jwt.SigningMethodHS256.Alg()}
	jwksMethods = []string{
		jwt.SigningMethodRS256.Alg(),
		jwt.SigningMethodRS384.Alg(),
		jwt.SigningMethodRS512.Alg(),
		jwt.SigningMethodES256.Alg(),
		jwt.SigningMethodES384.Alg(),
	}
)

// ErrInvalidToken is wrapped by every error [Verifier.Verify] returns: the
// token is missing, malformed, badly signed, not (or no longer) valid, or
// lacks a required claim. Interfaces map it to "unauthenticated".
var ErrInvalidToken = errors.New("invalid token")

// ErrTokenExpired is returned by [Verifier.Verify] for a token whose "exp"
// lies in the past (beyond the leeway). It wraps [ErrInvalidToken], so
// errors.Is(err, ErrInvalidToken) holds for it too; clients may react to it
// by refreshing their token.
var ErrTokenExpired error = &tokenError{msg: "token expired", kind: ErrInvalidToken}

// tokenError is a verification failure: a fixed, safe message and the
// sentinel it wraps.
type tokenError struct {
	msg  string
	kind error
}

func (e *tokenError) Error() string { return e.msg }
func (e *tokenError) Unwrap() error { return e.kind }

// invalid returns a verification failure with the safe message msg.
func invalid(msg string) error {
	return &tokenError{msg: msg, kind: ErrInvalidToken}
}

// VerifierConfig configures [NewVerifier]. Exactly one of HMACSecret and
// JWKSURL must be set.
type VerifierConfig struct {
	// HMACSecret, when set, makes the verifier accept HS256 tokens signed
	// with this secret and no other algorithm. It is meant for local
	// development and must be at least MinSecretLen bytes long. The
	// verifier keeps its own copy.
	HMACSecret []byte

	// JWKSURL, when set, makes the verifier accept RS256, RS384, RS512,
	// ES256 and ES384 tokens signed with a key of the JSON Web Key Set
	// served at this URL. The set is fetched by NewVerifier, refreshed
	// hourly in the background, and refetched (at most every five
	// minutes) when a token names an unknown "kid". The URL must use
	// https, or http to a loopback host (localhost, 127.0.0.0/8, ::1).
	JWKSURL string

	// Issuer, when non-empty, is the required value of the "iss" claim.
	// Required with JWKSURL: an identity provider signs tokens for every
	// service it serves.
	Issuer string

	// Audience, when non-empty, must be one of the values of the "aud"
	// claim. Required with JWKSURL, for the same reason as Issuer.
	Audience string

	// Leeway is the clock skew tolerated when checking "exp", "nbf" and
	// "iat". Zero means DefaultLeeway; negative is an error.
	Leeway time.Duration

	// MaxTTL, when positive, bounds a token's lifetime: it must carry
	// "iat", and "exp" may lie at most MaxTTL after it. A leaked token is
	// then useful for MaxTTL at most, however its issuer was configured.
	// Zero: no bound; negative is an error.
	MaxTTL time.Duration
}

// Verifier verifies bearer tokens and turns them into identities. It is
// safe for concurrent use.
type Verifier struct {
	parser  *jwt.Parser
	keyFunc jwt.Keyfunc
	methods []string
	issuer  string
	aud     string
	maxTTL  time.Duration
	cancel  context.CancelFunc
	// verified remembers recently verified tokens (by SHA-256) so that a
	// client sending the same token on every request is verified once.
	verified *lru.Cache[[sha256.Size]byte, verifiedToken]
}

// verifiedToken is a cached verification: the identity and until when the
// cache may answer for it (its expiry, and at most verifiedCacheTTL after
// verification, so that a key removed from a JWKS stops working soon).
type verifiedToken struct {
	id    app.Identity
	until time.Time
}

// Bounds of the verified-token cache.
const (
	verifiedCacheSize = 10_000
	verifiedCacheTTL  = 5 * time.Minute
)

// NewVerifier returns a verifier for cfg.
//
// With cfg.JWKSURL set, NewVerifier fetches the key set before returning and
// fails if it cannot be fetched or parsed, so a wrong URL is noticed at
// startup; ctx bounds that first fetch and the lifetime of the background
// refresh, which stops when ctx is cancelled or Close is called. Refresh
// failures are reported through log/slog's default logger with the URL and
// the error; they contain no token or key material.
func NewVerifier(ctx context.Context, cfg VerifierConfig) (*Verifier, error) {
	hasSecret := len(cfg.HMACSecret) > 0
	hasJWKS := cfg.JWKSURL != ""
	switch {
	case hasSecret && hasJWKS:
		return nil, errors.New("auth: verifier config sets both HMACSecret and JWKSURL; set exactly one")
	case !hasSecret && !hasJWKS:
		return nil, errors.New("auth: verifier config sets neither HMACSecret nor JWKSURL; set exactly one")
	case hasSecret && len(cfg.HMACSecret) < MinSecretLen:
		return nil, fmt.Errorf("auth: HMAC secret is %d bytes, want at least %d", len(cfg.HMACSecret), MinSecretLen)
	case hasJWKS && (cfg.Issuer == "" || cfg.Audience == ""):
		return nil, errors.New("auth: a JWKS verifier needs Issuer and Audience, or it would accept the identity provider's tokens for any other service")
	case cfg.Leeway < 0:
		return nil, fmt.Errorf("auth: negative leeway %s", cfg.Leeway)
	case cfg.MaxTTL < 0:
		return nil, fmt.Errorf("auth: negative token lifetime bound %s", cfg.MaxTTL)
	}
	leeway := cfg.Leeway
	if leeway == 0 {
		leeway = DefaultLeeway
	}

	verified, err := lru.New[[sha256.Size]byte, verifiedToken](verifiedCacheSize)
	if err != nil {
		return nil, fmt.Errorf("creating token cache: %w", err)
	}
	v := &Verifier{issuer: cfg.Issuer, aud: cfg.Audience, maxTTL: cfg.MaxTTL, cancel: func() {}, verified: verified}
	if hasSecret {
		secret := slices.Clone(cfg.HMACSecret)
		v.methods = hmacMethods
		v.keyFunc = func(*jwt.Token) (any, error) { return secret, nil }
	} else {
		if err := checkJWKSURL(cfg.JWKSURL); err != nil {
			return nil, err
		}
		refreshCtx, cancel := context.WithCancel(ctx)
		noErrorOnFirstFetch := false
		kf, err := keyfunc.NewDefaultOverrideCtx(refreshCtx, []string{cfg.JWKSURL}, keyfunc.Override{
			HTTPTimeout:               jwksHTTPTimeout,
			NoErrorReturnFirstHTTPReq: &noErrorOnFirstFetch,
			// The verifier decides when an unknown kid may refetch the set
			// (jwksKey); the key set then fetches at once, within the
			// HTTP timeout.
			RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
			RateLimitWaitMax:  jwksHTTPTimeout,
		})
		if err != nil {
			cancel() // The refresh goroutine may already be running.
			return nil, fmt.Errorf("auth: load JWKS from %s: %w", cfg.JWKSURL, err)
		}
		v.methods = jwksMethods
		v.keyFunc = jwksKey(refreshCtx, kf, rate.NewLimiter(rate.Every(jwksUnknownKIDRefresh), 1))
		v.cancel = cancel
	}

	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// checkJWKSURL reports whether raw is an absolute https URL, or an http URL
// to a loopback host.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("auth: parse JWKS URL: %w", err)
	}
	if u.Host == "" {
		return fmt.Errorf("auth: JWKS URL %q has no host", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("auth: JWKS URL %q must use https (plain http is allowed only for loopback hosts)", raw)
	default:
		return fmt.Errorf("auth: JWKS URL %q must use https", raw)
	}
}

// Close stops the background refresh of the key set. It is safe to call
// more than once and on an HMAC verifier, where it does nothing. A closed
// verifier keeps verifying tokens against the keys it already holds.
func (v *Verifier) Close() {
	v.cancel()
}

// claims is the decoding target for a token's payload. The custom claims
// are kept raw so that their types are checked only once the signature has
// been verified, and reported precisely.
type claims struct {
	jwt.RegisteredClaims
	TenantID    json.RawMessage `json:"tenant_id"`
	ProjectIDs  json.RawMessage `json:"project_ids"`
	Permissions json.RawMessage `json:"permissions"`
	// AuthorizedParty and ClientID name the client the token was issued
	// to (OIDC "azp", RFC 9068 "client_id"); either may be absent.
	AuthorizedParty json.RawMessage `json:"azp"`
	ClientID        json.RawMessage `json:"client_id"`
}

// Verify checks token (without the "Bearer " prefix) and returns the
// identity it carries.
//
// The token must be signed with an algorithm and key of the configured key
// source, must not be expired or not yet valid, must match the configured
// issuer and audience, and must carry the claims described in the package
// documentation. Every failure wraps ErrInvalidToken, an expired token also
// ErrTokenExpired; the error's message is a short fixed text that never
// contains the token.
func (v *Verifier) Verify(token string) (app.Identity, error) {
	if strings.TrimSpace(token) == "" {
		return app.Identity{}, invalid("token missing")
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	if hit, ok := v.verified.Get(key); ok && now.Before(hit.until) {
		return hit.id, nil
	}
	var c claims
	parsed, err := v.parser.ParseWithClaims(token, &c, v.keyFunc)
	if err != nil {
		return app.Identity{}, v.classify(parsed, &c, err)
	}
	if err := v.checkLifetime(&c); err != nil {
		return app.Identity{}, err
	}
	id, err := identityFrom(&c)
	if err != nil {
		return app.Identity{}, err
	}
	if id.TokenID == "" {
		// No jti: the token itself, by a digest that cannot be reversed.
		id.TokenID = hex.EncodeToString(key[:8])
	}
	until := now.Add(verifiedCacheTTL)
	if id.ExpiresAt.Before(until) {
		until = id.ExpiresAt
	}
	v.verified.Add(key, verifiedToken{id: id, until: until})
	return id, nil
}

// checkLifetime refuses a token that lives longer than MaxTTL, or that has
// no "iat" to measure its lifetime from, when MaxTTL is set.
func (v *Verifier) checkLifetime(c *claims) error {
	if v.maxTTL <= 0 {
		return nil
	}
	if c.IssuedAt == nil {
		return invalid("token missing iat")
	}
	if c.ExpiresAt.Sub(c.IssuedAt.Time) > v.maxTTL {
		return invalid("token lifetime exceeds the limit of " + v.maxTTL.String())
	}
	return nil
}

// jwksKey is kf's key function, except that a token naming a "kid" the key
// set does not hold lets kf fetch the set again only when refresh allows
// it (once per jwksUnknownKIDRefresh); otherwise it is refused at once,
// without a request to the identity provider.
func jwksKey(ctx context.Context, kf keyfunc.Keyfunc, refresh *rate.Limiter) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if kid, _ := t.Header["kid"].(string); kid != "" && !holdsKID(ctx, kf, kid) && !refresh.Allow() {
			return nil, errUnknownKID
		}
		return kf.Keyfunc(t)
	}
}

// errUnknownKID refuses a token whose key id the key set does not hold,
// between two refreshes.
var errUnknownKID = errors.New("unknown key id")

// holdsKID reports whether kf's key set holds a key with id kid, without
// fetching it.
func holdsKID(ctx context.Context, kf keyfunc.Keyfunc, kid string) bool {
	keys, err := kf.Storage().KeyReadAll(ctx)
	if err != nil {
		return false
	}
	for _, k := range keys {
		if k.Marshal().KID == kid {
			return true
		}
	}
	return false
}

// classify maps an error of the JWT parser to a verification failure with a
// safe message. parsed and c hold what could be decoded before the failure.
func (v *Verifier) classify(parsed *jwt.Token, c *claims, err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalid("token malformed")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		if parsed != nil {
			alg, _ := parsed.Header["alg"].(string)
			if !slices.Contains(v.methods, alg) {
				return invalid("token algorithm not allowed")
			}
		}
		if errors.Is(err, jwt.ErrTokenUnverifiable) {
			// The key lookup failed: unknown "kid", or the key set
			// could not be fetched.
			return invalid("token signing key unknown")
		}
		return invalid("token signature invalid")
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		// Checked from the most to the least fundamental: a token for
		// someone else is reported as such even if it also expired.
		switch {
		case errors.Is(err, jwt.ErrTokenInvalidIssuer), v.issuer != "" && c.Issuer == "":
			return invalid("token issuer invalid")
		case errors.Is(err, jwt.ErrTokenInvalidAudience), v.aud != "" && !slices.ContainsFunc(c.Audience, isNotBlank):
			return invalid("token audience invalid")
		case c.ExpiresAt == nil:
			return invalid("token missing exp")
		case errors.Is(err, jwt.ErrTokenExpired):
			return ErrTokenExpired
		case errors.Is(err, jwt.ErrTokenNotValidYet):
			return invalid("token not valid yet")
		case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
			return invalid("token issued in the future")
		}
		return invalid("token claims invalid")
	}
	return invalid("token invalid")
}

// identityFrom checks the claims that are not registered JWT claims and
// builds the identity from c, whose registered claims are already verified.
func identityFrom(c *claims) (app.Identity, error) {
	if !isNotBlank(c.Subject) {
		return app.Identity{}, invalid("token missing sub")
	}

	var tenant string
	if isAbsent(c.TenantID) {
		return app.Identity{}, invalid("token missing tenant_id")
	}
	if err := json.Unmarshal(c.TenantID, &tenant); err != nil {
		return app.Identity{}, invalid("token tenant_id is not a string")
	}
	if !isNotBlank(tenant) {
		return app.Identity{}, invalid("token missing tenant_id")
	}
	// Identities end up in stored records (audit subjects, tenant keys):
	// they must be text PostgreSQL can store, like every other identifier.
	if domain.ValidateText("tenant_id", tenant, domain.MaxShortTextLength, true, true) != nil {
		return app.Identity{}, invalid("token tenant_id must be an identifier without control characters or surrounding white space, at most 128 bytes")
	}
	if domain.ValidateText("sub", c.Subject, domain.MaxIDLength, true, true) != nil {
		return app.Identity{}, invalid("token sub must be an identifier without control characters or surrounding white space, at most 256 bytes")
	}
	if strings.HasPrefix(c.Subject, domain.SystemSubjectPrefix) {
		// The service's own identities are never tokens: a token may not
		// pass for one in the evidence it records.
		return app.Identity{}, invalid("token sub must not start with system:")
	}
	// Who recorded an event is taken from these claims and kept in the
	// chain: they must be storable text like the subject.
	if c.Issuer != "" && domain.ValidateText("iss", c.Issuer, domain.MaxIDLength, true, true) != nil {
		return app.Identity{}, invalid("token iss must be text without control characters or surrounding white space, at most 256 bytes")
	}
	if c.ID != "" && domain.ValidateText("jti", c.ID, domain.MaxIDLength, true, true) != nil {
		return app.Identity{}, invalid("token jti must be text without control characters or surrounding white space, at most 256 bytes")
	}
	client, err := clientClaim(c)
	if err != nil {
		return app.Identity{}, err
	}

	if isAbsent(c.ProjectIDs) {
		return app.Identity{}, invalid("token missing project_ids")
	}
	projects, ok := stringArray(c.ProjectIDs)
	if !ok {
		return app.Identity{}, invalid("token project_ids is not an array of non-blank strings")
	}
	if len(projects) == 0 {
		return app.Identity{}, invalid("token missing project_ids")
	}
	for _, p := range projects {
		if domain.ValidateText("project_ids", p, domain.MaxShortTextLength, true, true) != nil {
			return app.Identity{}, invalid("token project_ids must be identifiers without control characters or surrounding white space, at most 128 bytes")
		}
	}

	var perms []app.Permission
	if !isAbsent(c.Permissions) {
		names, ok := stringArray(c.Permissions)
		if !ok {
			return app.Identity{}, invalid("token permissions is not an array of non-blank strings")
		}
		for _, n := range names {
			perms = append(perms, app.Permission(n))
		}
	}

	return app.Identity{
		Subject:     c.Subject,
		Issuer:      c.Issuer,
		TokenID:     c.ID,
		ClientID:    client,
		TenantID:    tenant,
		ProjectIDs:  projects,
		Permissions: perms,
		ExpiresAt:   c.ExpiresAt.UTC(),
	}, nil
}

// clientClaim returns the client the token was issued to: "azp", else
// "client_id", else "". A present claim must be a storable string.
func clientClaim(c *claims) (string, error) {
	for _, raw := range []struct {
		name string
		v    json.RawMessage
	}{{"azp", c.AuthorizedParty}, {"client_id", c.ClientID}} {
		if isAbsent(raw.v) {
			continue
		}
		var s string
		if json.Unmarshal(raw.v, &s) != nil || domain.ValidateText(raw.name, s, domain.MaxIDLength, false, true) != nil {
			return "", invalid("token " + raw.name + " must be a string without control characters or surrounding white space, at most 256 bytes")
		}
		if s != "" {
			return s, nil
		}
	}
	return "", nil
}

// isAbsent reports whether a raw claim is missing or JSON null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// stringArray decodes raw as a JSON array whose elements are all non-blank
// strings. ok is false for anything else, including an array with a
// number, null or blank element.
func stringArray(raw json.RawMessage) (values []string, ok bool) {
	var elems []any
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false
	}
	values = make([]string, 0, len(elems))
	for _, e := range elems {
		s, isString := e.(string)
		if !isString || !isNotBlank(s) {
			return nil, false
		}
		values = append(values, s)
	}
	return values, true
}

// isNotBlank reports whether s contains something other than white space.
func isNotBlank(s string) bool {
	return strings.TrimSpace(s) != ""
}
