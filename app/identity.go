package app

import (
	"slices"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// Permission names one capability an identity may hold. Tokens carry them in
// their "permissions" claim.
type Permission string

// The permissions used across the product.
const (
	PermissionAuditRead         Permission = "audit:read"
	PermissionAuditWrite        Permission = "audit:write"
	PermissionWebhooksRead      Permission = "webhooks:read"
	PermissionWebhooksWrite     Permission = "webhooks:write"
	PermissionDeliveriesRedrive Permission = "deliveries:redrive"
	PermissionExportsRead       Permission = "exports:read"
	PermissionExportsWrite      Permission = "exports:write"
	PermissionExportsDownload   Permission = "exports:download"
	// PermissionHistoryWrite lets the platform's alarm and telemetry
	// services append their history (exported by data exports).
	PermissionHistoryWrite Permission = "history:write"
	PermissionAdmin        Permission = "admin"
	// PermissionStreamsRead and PermissionStreamsWrite read and manage
	// audit streams (docs/streams.md).
	PermissionStreamsRead  Permission = "streams:read"
	PermissionStreamsWrite Permission = "streams:write"
)

// AllProjects is the project_ids entry that grants every project of the
// identity's tenant.
const AllProjects = "*"

// Identity is a verified caller: who it is, which tenant it acts in, which
// projects of that tenant it may touch and what it may do there. Interfaces
// build it from a verified token and pass it to every use case; nothing else
// decides who may do what.
type Identity struct {
	// Subject is the token's "sub" claim.
	Subject string
	// Issuer is the token's "iss" claim ("" when it has none).
	Issuer string
	// TokenID identifies the token: its "jti" claim, or, when it has none,
	// the first 16 hex digits of the SHA-256 of the token.
	TokenID string
	// ClientID is the token's "azp" claim, else its "client_id"; "" when
	// it has neither.
	ClientID string
	// TenantID is the tenant every read and write is scoped to.
	TenantID string
	// ProjectIDs lists the projects the identity may access; AllProjects
	// ("*") grants every project of the tenant.
	ProjectIDs []string
	// Permissions lists the capabilities granted.
	Permissions []Permission
	// ExpiresAt is when the token stops being valid.
	ExpiresAt time.Time
}

// ServiceIssuer is the recordedBy issuer of events the service records under
// its own identities (subjects "system:…"), which come from no token.
const ServiceIssuer = "urn:aether:service"

// Recorder is who records events for the identity: the verified token's
// issuer, subject, token id and client, or the service itself for its own
// "system:" identities (no token has such a subject: the verifier refuses
// it).
func (id Identity) Recorder() *domain.Recorder {
	if strings.HasPrefix(id.Subject, domain.SystemSubjectPrefix) {
		return &domain.Recorder{Issuer: ServiceIssuer, Subject: id.Subject}
	}
	return &domain.Recorder{Issuer: id.Issuer, Subject: id.Subject, TokenID: id.TokenID, ClientID: id.ClientID}
}

// HasPermission reports whether the identity holds p. The admin permission
// does not imply the others: tokens name what they may do.
func (id Identity) HasPermission(p Permission) bool {
	return slices.Contains(id.Permissions, p)
}

// CanAccessProject reports whether the identity may touch projectID of its
// tenant.
func (id Identity) CanAccessProject(projectID string) bool {
	for _, p := range id.ProjectIDs {
		if p == AllProjects || p == projectID {
			return true
		}
	}
	return false
}
