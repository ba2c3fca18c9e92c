package app

import "github.com/aetheriot/aether-audit/domain"

// authorize checks that id holds perm and may access projectID. A project
// outside the token answers ErrProjectNotFound, exactly as a missing one;
// so does a project id no event could carry (invalid UTF-8, control
// characters, too long), which PostgreSQL may not even accept as a
// parameter.
func authorize(id Identity, perm Permission, projectID string) error {
	if id.TenantID == "" {
		return newError(CodeUnauthenticated, "authentication required")
	}
	if !id.HasPermission(perm) {
		return &Error{Code: CodeForbidden, Message: "missing permission " + string(perm)}
	}
	if projectID != "" && (!id.CanAccessProject(projectID) ||
		domain.ValidateText("projectId", projectID, domain.MaxShortTextLength, true, true) != nil) {
		return ErrProjectNotFound
	}
	return nil
}
