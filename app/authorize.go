package app

import "github.com/aetheriot/aether-audit/domain"

// tenantScope is the project argument of authorize for an operation that
// names no project (a tenant-wide one, or one whose record's project is
// checked once it is read). It cannot be a project id: it holds a control
// character.
const tenantScope = "\x00tenant"

// authorize checks that id holds perm and may access projectID, the
// project the caller names (tenantScope when it names none). A project
// outside the token answers ErrProjectNotFound, exactly as a missing one;
// so does an empty project id, and one no event could carry (invalid
// UTF-8, control characters, too long), which PostgreSQL may not even
// accept as a parameter.
func authorize(id Identity, perm Permission, projectID string) error {
	if id.TenantID == "" {
		return newError(CodeUnauthenticated, "authentication required")
	}
	if !id.HasPermission(perm) {
		return &Error{Code: CodeForbidden, Message: "missing permission " + string(perm)}
	}
	if projectID != tenantScope && (projectID == "" || !id.CanAccessProject(projectID) ||
		domain.ValidateText("projectId", projectID, domain.MaxShortTextLength, true, true) != nil) {
		return ErrProjectNotFound
	}
	return nil
}
