package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

// The isolation matrix's rows of audit streams (isoRows appends them) and
// the owner's stream they are about.

const (
	isoStreamFields = `id projectIds allProjects sinkType sinkUrl state createdBy projects { projectId cursor head lagEvents state lastError }`
	isoStreamQuery  = `query($id: ID!) { auditStream(id: $id) { ` + isoStreamFields + ` } }`
	isoStreamsQuery = `query { auditStreams { edges { cursor node { ` + isoStreamFields + ` } } pageInfo { hasNextPage } } }`
	isoCreateStream = `mutation($in: CreateAuditStreamInput!) { createAuditStream(input: $in) { stream { ` + isoStreamFields + ` } signingSecret } }`
	isoUpdateStream = `mutation($in: UpdateAuditStreamInput!) { updateAuditStream(input: $in) { stream { ` + isoStreamFields + ` } } }`
	isoPauseStream  = `mutation($in: AuditStreamIdInput!) { pauseAuditStream(input: $in) { stream { id state } } }`
	isoResumeStream = `mutation($in: AuditStreamIdInput!) { resumeAuditStream(input: $in) { stream { id state } } }`
	isoDeleteStream = `mutation($in: DeleteAuditStreamInput!) { deleteAuditStream(input: $in) { streamId } }`
	// isoStreamURL is the owner's stream's receiver.
	isoStreamURL = "https://owner-secret.example.com/stream"
)

// seedStreams creates the owner's HTTPS stream of project A.
func (e *isoEnv) seedStreams(t *testing.T) {
	t.Helper()
	res := e.graphql(t, e.owner, isoCreateStream, map[string]any{"in": map[string]any{
		"projectIds": []string{projectA}, "sink": map[string]any{"type": "HTTPS", "url": isoStreamURL}}})
	var data struct {
		CreateAuditStream struct {
			Stream        struct{ ID string } `json:"stream"`
			SigningSecret string              `json:"signingSecret"`
		} `json:"createAuditStream"`
	}
	res.decode(t, &data)
	require.NotEmpty(t, data.CreateAuditStream.SigningSecret)
	e.res.streamID = data.CreateAuditStream.Stream.ID
	e.markers = append(e.markers, e.res.streamID, data.CreateAuditStream.SigningSecret)
}

// isoStreamRows are the rows of the audit stream operations.
func isoStreamRows() []isoRow {
	in := func(v map[string]any) map[string]any { return map[string]any{"in": v} }
	streamIn := func(r isoResources) map[string]any { return in(map[string]any{"streamId": r.streamID}) }
	return []isoRow{
		{name: "auditStream", perm: app.PermissionStreamsRead, doc: isoStreamQuery,
			vars:        func(r isoResources) map[string]any { return map[string]any{"id": r.streamID} },
			otherTenant: isoIsNull, otherProject: isoIsNull, malformedIDs: true},
		{name: "auditStreams", perm: app.PermissionStreamsRead, doc: isoStreamsQuery,
			vars:        func(isoResources) map[string]any { return nil },
			otherTenant: isoIsEmpty, otherProject: isoIsEmpty},
		{name: "createAuditStream", perm: app.PermissionStreamsWrite, doc: isoCreateStream,
			vars: func(r isoResources) map[string]any {
				// Tenant B's own receiver: its events must not carry owner
				// markers that its later reads would then show.
				return in(map[string]any{"projectIds": []string{r.project}, "sink": map[string]any{"type": "HTTPS", "url": "https://probe.example.com/stream"}})
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				var data struct {
					CreateAuditStream struct {
						Stream struct {
							ID         string   `json:"id"`
							ProjectIDs []string `json:"projectIds"`
						} `json:"stream"`
					} `json:"createAuditStream"`
				}
				got.gql.decode(t, &data)
				require.Equal(t, []string{projectA}, data.CreateAuditStream.Stream.ProjectIDs, "tenant B's own project of that name")
				require.NotEqual(t, e.res.streamID, data.CreateAuditStream.Stream.ID)
			}),
			otherProject: isoNotFound},
		{name: "updateAuditStream", perm: app.PermissionStreamsWrite, doc: isoUpdateStream,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"streamId": r.streamID, "url": "https://probe.example.com/stream"})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "pauseAuditStream", perm: app.PermissionStreamsWrite, doc: isoPauseStream, vars: streamIn,
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "resumeAuditStream", perm: app.PermissionStreamsWrite, doc: isoResumeStream, vars: streamIn,
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "deleteAuditStream", perm: app.PermissionStreamsWrite, doc: isoDeleteStream,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"streamId": r.streamID, "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
	}
}
