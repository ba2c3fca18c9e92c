package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addPrompts registers the prompts. They use only the server's tools and
// read nothing themselves.
func (s *Server) addPrompts() {
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        "investigate_incident",
		Title:       "Investigate an incident",
		Description: "Reconstruct what happened in a project during a time range, optionally to one resource or by one recorder, with evidence that checks out.",
		Arguments: []*mcp.PromptArgument{
			{Name: "projectId", Description: "the project to investigate", Required: true},
			{Name: "from", Description: "start of the time range, RFC 3339 (e.g. 2026-12-01T22:00:00Z)", Required: true},
			{Name: "to", Description: "end of the time range, RFC 3339", Required: true},
			{Name: "resourceType", Description: "the type of the resource concerned, e.g. device"},
			{Name: "resourceId", Description: "the id of the resource concerned"},
			{Name: "recorder", Description: "the subject of the token that recorded the events (recordedBy.subject)"},
		},
	}, investigateIncident)
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        "review_recorder",
		Title:       "Review what a recorder did",
		Description: "List the events one token subject recorded in a project, the risky ones first, and check that they are intact.",
		Arguments: []*mcp.PromptArgument{
			{Name: "projectId", Description: "the project", Required: true},
			{Name: "recorder", Description: "the subject of the recording token (recordedBy.subject)", Required: true},
			{Name: "from", Description: "start of the time range, RFC 3339 (optional)"},
			{Name: "to", Description: "end of the time range, RFC 3339 (optional)"},
		},
	}, reviewRecorder)
}

// investigateIncident is the investigate_incident prompt.
func investigateIncident(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a := req.Params.Arguments
	if err := required(a, "projectId", "from", "to"); err != nil {
		return nil, err
	}
	filter := []string{fmt.Sprintf(`"occurredFrom": %q, "occurredTo": %q`, a["from"], a["to"])}
	scope := ""
	if t, id := a["resourceType"], a["resourceId"]; t != "" || id != "" {
		if t != "" {
			filter = append(filter, fmt.Sprintf(`"resourceType": %q`, t))
		}
		if id != "" {
			filter = append(filter, fmt.Sprintf(`"resourceId": %q`, id))
		}
		scope += fmt.Sprintf(" concerning the resource %s %s", t, id)
	}
	if r := a["recorder"]; r != "" {
		filter = append(filter, fmt.Sprintf(`"recordedBySubject": %q`, r))
		scope += fmt.Sprintf(" recorded by %s", r)
	}
	text := fmt.Sprintf(`Investigate what happened in project %q between %s and %s%s.

1. Call search_audit_events with projectId %q, order OLDEST_FIRST and filter {%s}. Follow endCursor (as after) until hasNextPage is false, or stop at about 500 events and say so.
2. Build a timeline: for each event give occurredAt, action, subject (type, id, displayName), resource, outcome, and who recorded it (recordedBy). Call out outcomes FAILURE, DENIED and ERROR, and governance with risk HIGH or MEDIUM: who approved it (governance.confirmedBy), the reason and the ticket.
3. Where events share correlation.traceId or requestId, group them, and search with that correlation filter (without the time range) for related events outside the range.
4. For any webhook.* or export.* events, look at the deliveries (list_webhook_deliveries, get_webhook_delivery) or exports (list_data_exports) they concern.
5. Call verify_audit_chain for the project with fromSequence and toSequence spanning the events you used, and report whether the evidence is intact.

Answer with the timeline, the open questions, and the sequences of the events each statement rests on. Do not call redrive_webhook_delivery or request_data_export unless asked.`,
		a["projectId"], a["from"], a["to"], scope, a["projectId"], strings.Join(filter, ", "))
	return &mcp.GetPromptResult{
		Description: "Investigate project " + a["projectId"] + " from " + a["from"] + " to " + a["to"],
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
	}, nil
}

// reviewRecorder is the review_recorder prompt.
func reviewRecorder(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a := req.Params.Arguments
	if err := required(a, "projectId", "recorder"); err != nil {
		return nil, err
	}
	filter := fmt.Sprintf(`"recordedBySubject": %q`, a["recorder"])
	if a["from"] != "" {
		filter += fmt.Sprintf(`, "occurredFrom": %q`, a["from"])
	}
	if a["to"] != "" {
		filter += fmt.Sprintf(`, "occurredTo": %q`, a["to"])
	}
	text := fmt.Sprintf(`Review what %q recorded in project %q.

1. Call search_audit_events with projectId %q, order NEWEST_FIRST and filter {%s}; follow endCursor while hasNextPage (at most about 500 events).
2. Summarize by action and outcome. List first every event whose governance.risk is HIGH or MEDIUM, or whose outcome is not SUCCESS, with its sequence, occurredAt, subject, resource, reason, ticket and confirmedBy.
3. Note events whose subject differs from the recorder: a service recording for users is normal, anything else is worth a question.
4. Call verify_audit_chain over the sequences you looked at and report whether they are intact.`,
		a["recorder"], a["projectId"], a["projectId"], filter)
	return &mcp.GetPromptResult{
		Description: "Review the events " + a["recorder"] + " recorded in project " + a["projectId"],
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
	}, nil
}

// required refuses a prompt request that lacks an argument.
func required(args map[string]string, names ...string) error {
	for _, n := range names {
		if strings.TrimSpace(args[n]) == "" {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing argument " + n}
		}
	}
	return nil
}
