package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// TokenRequest describes a token for MintHS256.
type TokenRequest struct {
	// Subject becomes the "sub" claim; it must not be blank. Choosing a
	// default subject is left to the caller.
	Subject string
	// TenantID becomes the "tenant_id" claim; it must not be blank.
	TenantID string
	// ProjectIDs becomes the "project_ids" claim; it must hold at least one
	// entry and no blank one. app.AllProjects grants every project of the
	// tenant.
	ProjectIDs []string
	// Permissions becomes the "permissions" claim, omitted when empty; no
	// entry may be blank.
	Permissions []app.Permission
	// TTL is how long the token stays valid after its issue time; it must
	// be positive.
	TTL time.Duration
	// Issuer, when non-empty, becomes the "iss" claim.
	Issuer string
	// Audience, when non-empty, becomes the single value of the "aud"
	// claim.
	Audience string
}

// mintClaims is the payload MintHS256 signs.
type mintClaims struct {
	jwt.RegisteredClaims
	TenantID    string           `json:"tenant_id"`
	ProjectIDs  []string         `json:"project_ids"`
	Permissions []app.Permission `json:"permissions,omitempty"`
}

// MintHS256 returns a compact HS256 token for req, signed with secret and
// issued at now: its "iat" is now and its "exp" now+req.TTL, both truncated
// to whole seconds. The request is checked as the Verifier would check the
// resulting token, so a minted token verifies with a Verifier configured
// with the same secret (and the same issuer and audience, if any) until it
// expires. secret must be at least MinSecretLen bytes long.
func MintHS256(secret []byte, req TokenRequest, now time.Time) (string, error) {
	if len(secret) < MinSecretLen {
		return "", fmt.Errorf("auth: mint token: HMAC secret is %d bytes, want at least %d", len(secret), MinSecretLen)
	}
	if err := req.validate(); err != nil {
		return "", fmt.Errorf("auth: mint token: %w", err)
	}
	c := mintClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: req.Subject,
			Issuer:  req.Issuer,
			// Every minted token has its own id: events it records name it
			// in recordedBy.tokenId.
			ID:        uuid.NewString(),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(req.TTL)),
		},
		TenantID:    req.TenantID,
		ProjectIDs:  req.ProjectIDs,
		Permissions: req.Permissions,
	}
	if req.Audience != "" {
		c.Audience = jwt.ClaimStrings{req.Audience}
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("auth: mint token: sign: %w", err)
	}
	return signed, nil
}

// validate reports the first way in which r does not describe a token the
// Verifier accepts.
func (r TokenRequest) validate() error {
	switch {
	case !isNotBlank(r.Subject):
		return errors.New("subject is blank")
	case strings.HasPrefix(r.Subject, domain.SystemSubjectPrefix):
		return errors.New("subject starts with system:, reserved for the service's own identities")
	case !isNotBlank(r.TenantID):
		return errors.New("tenant id is blank")
	case len(r.ProjectIDs) == 0:
		return errors.New("no project ids")
	case r.TTL <= 0:
		return fmt.Errorf("ttl %s is not positive", r.TTL)
	}
	for i, p := range r.ProjectIDs {
		if !isNotBlank(p) {
			return fmt.Errorf("project id %d is blank", i)
		}
	}
	for i, p := range r.Permissions {
		if !isNotBlank(string(p)) {
			return fmt.Errorf("permission %d is blank", i)
		}
	}
	return nil
}
