package client

import "context"

const getEvent = `query($p: ID!, $id: ID!) { auditEvent(projectId: $p, id: $id) { ` + eventFields + ` } }`

// Get returns the event of a project by id. An event the project does not
// have (or another tenant's) is an [*Error] with code NOT_FOUND, as is a
// project outside the token.
func (c *Client) Get(ctx context.Context, projectID, id string) (Event, error) {
	var out struct{ AuditEvent *Event }
	if err := c.do(ctx, query, getEvent, map[string]any{"p": projectID, "id": id}, &out); err != nil {
		return Event{}, err
	}
	if out.AuditEvent == nil {
		return Event{}, &Error{Code: CodeNotFound, Message: "audit event not found"}
	}
	return *out.AuditEvent, nil
}
