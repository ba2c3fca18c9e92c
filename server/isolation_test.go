package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	gqlast "github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// The tenant isolation matrix (docs/security.md): every GraphQL root field
// and every REST/SSE route, called by five identities that must not reach
// tenant A's project A, where one of everything really exists; and the
// export download capability, forged in the corresponding five ways.
//
// To cover a new operation, add one isoRow to isoRows (the test fails,
// naming the operation, until there is one).

// isoIdentity is a caller of the matrix.
type isoIdentity string

const (
	// isoOtherTenant is tenant B with every project ("*", so also its own
	// project named like the owner's) and every permission.
	isoOtherTenant isoIdentity = "OtherTenant"
	// isoOtherProject is tenant A with project B only and every permission.
	isoOtherProject isoIdentity = "OtherProject"
	// isoNoPermission is the owner's tenant and project with every
	// permission but the row's.
	isoNoPermission isoIdentity = "NoPermission"
	// isoExpired is the owner's tenant and project with every permission,
	// expired an hour ago.
	isoExpired isoIdentity = "ExpiredToken"
	// isoNoToken sends no Authorization.
	isoNoToken isoIdentity = "NoToken"
)

var isoIdentities = []isoIdentity{isoOtherTenant, isoOtherProject, isoNoPermission, isoExpired, isoNoToken}

// isoOutcome is what another tenant or project gets.
type isoOutcome int

const (
	// isoRefused: an error of the expected code, the same bytes as the same
	// call naming a resource that does not exist.
	isoRefused isoOutcome = iota + 1
	// isoNull: a lookup answers null without an error, the same bytes as
	// for an id that names nothing.
	isoNull
	// isoEmpty: the answer of a never-used project (tenant B's own project
	// of the owner's project's name is empty), the same bytes.
	isoEmpty
	// isoOwn: the command works in tenant B's own project of that name and
	// touches nothing of tenant A; check says what it did.
	isoOwn
)

// isoExpect is the expected answer of one identity.
type isoExpect struct {
	outcome isoOutcome
	code    string // of isoRefused
	// check asserts what an isoOwn call did (tenant B's side).
	check func(t *testing.T, e *isoEnv, got *isoGot)
}

var (
	isoNotFound = isoExpect{outcome: isoRefused, code: "NOT_FOUND"}
	isoIsNull   = isoExpect{outcome: isoNull}
	isoIsEmpty  = isoExpect{outcome: isoEmpty}
)

func isoOwnWith(check func(t *testing.T, e *isoEnv, got *isoGot)) isoExpect {
	return isoExpect{outcome: isoOwn, check: check}
}

// isoRow is one operation of the matrix: a GraphQL root field (doc and
// vars) or an HTTP route (route and path). The permission-less,
// expired-token and no-token identities are always FORBIDDEN (naming perm)
// and UNAUTHENTICATED; the row says what another tenant and another project
// get.
type isoRow struct {
	// name is the GraphQL root field, or for HTTP a name of the variant.
	name string
	perm app.Permission
	// orPerms also allow the operation: the identity without perm lacks
	// them too.
	orPerms []app.Permission
	// doc and vars make the GraphQL request for the resources r.
	doc  string
	vars func(r isoResources) map[string]any
	// route is the ServeMux pattern an HTTP row exercises; path is the
	// request path and query for the resources r.
	route string
	path  func(r isoResources) string
	// otherTenant and otherProject are the expected answers of
	// isoOtherTenant and isoOtherProject.
	otherTenant, otherProject isoExpect
	// malformedIDs: the spec says a malformed id is not found either, so
	// refusals are also compared with the call naming malformed ids.
	malformedIDs bool
	// tenantWide: a setting of the whole tenant, which needs a token for
	// all projects; the owner reads it with such a token.
	tenantWide bool
}

// isoResources names what a call is about: the owner's, or missing ones.
type isoResources struct {
	project        string
	eventID        string // recorded before the webhook subscription
	event2ID       string // recorded after it; the delivery carries it
	destinationID  string
	subscriptionID string
	deliveryID     string
	exportID       string
	alarmEntryID   string
	streamID       string // an audit stream of the project (isolation_streams_test.go)
}

// isoMissing names nothing: a never-used project and random (or
// malformed) ids.
func isoMissing(malformed bool) isoResources {
	id := func() string {
		if malformed {
			return "not-a-uuid"
		}
		return uuid.NewString()
	}
	return isoResources{
		project: "proj-never-used", eventID: id(), event2ID: id(), destinationID: id(), subscriptionID: id(),
		deliveryID: id(), exportID: id(), alarmEntryID: id(), streamID: id(),
	}
}

// Idempotency keys the owner used; other tenants' probes reuse them.
const (
	isoBatchKey        = "iso-owner-batch"
	isoSubscriptionKey = "iso-owner-subscription"
	isoExportKey       = "iso-owner-export"
)

const (
	isoAuditEventQuery  = `query($p: ID!, $id: ID!) { auditEvent(projectId: $p, id: $id) { ...E } }` + "\n" + eventFields
	isoVerifyQuery      = `query($p: ID!) { verifyAuditChain(projectId: $p) { valid checkedCount firstInvalidSequence headSequence headHash } }`
	isoRetentionQuery   = `query { auditRetention { retentionDays tenantRetentionDays defaultRetentionDays } }`
	isoCheckpointsQuery = `query($p: ID!) { auditCheckpoints(projectId: $p) { edges { cursor node { sequence chainHash keyId jws issuedAt previousCheckpoint } } } }`
	isoCreateCheckpoint = `mutation($in: CreateAuditCheckpointInput!) { createAuditCheckpoint(input: $in) { checkpoint { sequence chainHash jws } } }`
	isoSetRetention     = `mutation($in: SetAuditRetentionInput!) { setAuditRetention(input: $in) { retentionDays tenantRetentionDays } }`
	// isoOwnerRetentionDays is the owner's tenant's retention; it is owner
	// data.
	isoOwnerRetentionDays = 3650
	isoVerificationSub    = `subscription($p: ID!) { auditChainVerification(projectId: $p) { valid complete checkedCount headSequence headHash } }`
	isoRecordedSub        = `subscription($p: ID!, $after: Uint64) {
  auditEventRecorded(projectId: $p, afterSequence: $after) { id tenantId projectId sequence action chainHash }
}`
)

// isoTelemetryPoint is the owner's telemetry point; tenant B appends the same.
func isoTelemetryPoint() map[string]any {
	return map[string]any{"deviceId": "owner-secret-device", "metric": "owner.secret.metric",
		"occurredAt": "2026-01-03T10:00:00Z", "value": 21.5, "unit": "C"}
}

// isoRows is the matrix's table.
func isoRows() []isoRow {
	project := func(r isoResources) map[string]any { return map[string]any{"p": r.project} }
	in := func(v map[string]any) map[string]any { return map[string]any{"in": v} }
	withID := func(m map[string]any, id string) map[string]any { m["id"] = id; return m }
	rows := []isoRow{
		// Queries.
		{name: "auditEvents", perm: app.PermissionAuditRead, doc: listEventsQuery, vars: project,
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "auditEvent", perm: app.PermissionAuditRead, doc: isoAuditEventQuery,
			vars:        func(r isoResources) map[string]any { return map[string]any{"p": r.project, "id": r.eventID} },
			otherTenant: isoIsNull, otherProject: isoNotFound, malformedIDs: true},
		{name: "verifyAuditChain", perm: app.PermissionAuditRead, doc: isoVerifyQuery, vars: project,
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "webhookDestination", perm: app.PermissionWebhooksRead, doc: destinationQuery,
			vars:        func(r isoResources) map[string]any { return map[string]any{"id": r.destinationID} },
			otherTenant: isoIsNull, otherProject: isoIsNull, malformedIDs: true},
		{name: "webhookDestinations", perm: app.PermissionWebhooksRead, doc: destinationsQuery, vars: project,
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "webhookSubscription", perm: app.PermissionWebhooksRead, doc: subscriptionQuery,
			vars:        func(r isoResources) map[string]any { return map[string]any{"id": r.subscriptionID} },
			otherTenant: isoIsNull, otherProject: isoIsNull, malformedIDs: true},
		{name: "webhookSubscriptions", perm: app.PermissionWebhooksRead, doc: subscriptionsQuery, vars: project,
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "webhookDelivery", perm: app.PermissionWebhooksRead, doc: deliveryQuery,
			vars:        func(r isoResources) map[string]any { return map[string]any{"id": r.deliveryID} },
			otherTenant: isoIsNull, otherProject: isoIsNull, malformedIDs: true},
		{name: "webhookDeliveries", perm: app.PermissionWebhooksRead, doc: deliveriesQuery,
			vars: func(r isoResources) map[string]any {
				return map[string]any{"p": r.project, "filter": map[string]any{"subscriptionId": r.subscriptionID, "eventId": r.event2ID}}
			},
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "dataExport", perm: app.PermissionExportsRead, doc: exportQuery,
			vars:        func(r isoResources) map[string]any { return map[string]any{"id": r.exportID} },
			otherTenant: isoIsNull, otherProject: isoIsNull, malformedIDs: true},
		{name: "dataExports", perm: app.PermissionExportsRead, doc: exportsQuery, vars: project,
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "auditCheckpoints", perm: app.PermissionAuditRead, doc: isoCheckpointsQuery, vars: project,
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "auditRetention", perm: app.PermissionAdmin, doc: isoRetentionQuery, tenantWide: true,
			vars: func(isoResources) map[string]any { return nil },
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				require.Contains(t, string(got.raw), `"tenantRetentionDays":null`, "tenant B has the default, not the owner's window")
			}),
			otherProject: isoExpect{outcome: isoRefused, code: "FORBIDDEN"}},

		// Mutations. Tenant B's probes name the owner's ids and idempotency
		// keys: they must neither collide with nor reveal the owner's.
		{name: "recordAuditEvent", perm: app.PermissionAuditWrite, doc: recordEventMutation,
			vars: func(r isoResources) map[string]any {
				return in(withID(eventInput(r.project, "probe.isolation.recorded"), r.eventID))
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				var data struct {
					RecordAuditEvent struct{ Event event } `json:"recordAuditEvent"`
				}
				got.gql.decode(t, &data)
				ev := data.RecordAuditEvent.Event
				require.Equal(t, []string{tenantB, projectA, "probe.isolation.recorded"}, []string{ev.TenantID, ev.ProjectID, ev.Action},
					"an event id of tenant A is free in tenant B")
			}),
			otherProject: isoNotFound},
		{name: "recordAuditEvents", perm: app.PermissionAuditWrite, doc: recordEventsMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"idempotencyKey": isoBatchKey,
					"events": []any{withID(eventInput(r.project, "probe.isolation.batch"), r.event2ID)}})
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				var data struct {
					RecordAuditEvents struct{ Events []event } `json:"recordAuditEvents"`
				}
				got.gql.decode(t, &data)
				require.Len(t, data.RecordAuditEvents.Events, 1)
				ev := data.RecordAuditEvents.Events[0]
				require.Equal(t, []string{tenantB, "probe.isolation.batch"}, []string{ev.TenantID, ev.Action},
					"an idempotency key of tenant A is free in tenant B")
			}),
			otherProject: isoNotFound},
		{name: "createAuditCheckpoint", perm: app.PermissionAuditWrite, orPerms: []app.Permission{app.PermissionAdmin},
			doc: isoCreateCheckpoint, vars: func(r isoResources) map[string]any { return in(map[string]any{"projectId": r.project}) },
			// Tenant B's project of the owner's name is missing, unless a
			// probe of another row recorded events there first: then the
			// checkpoint is tenant B's own.
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				if len(got.gql.Errors) > 0 {
					require.Equal(t, "NOT_FOUND", got.code(t), "%s", got.raw)
					return
				}
				var data struct {
					CreateAuditCheckpoint struct{ Checkpoint struct{ JWS string } } `json:"createAuditCheckpoint"`
				}
				got.gql.decode(t, &data)
				p, _, err := checkpoint.Parse(data.CreateAuditCheckpoint.Checkpoint.JWS)
				require.NoError(t, err)
				require.Equal(t, tenantB, p.TenantID, "a checkpoint of tenant B's own chain")
			}),
			otherProject: isoNotFound},
		{name: "createWebhookDestination", perm: app.PermissionWebhooksWrite, doc: createDestinationMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"projectId": r.project, "url": "https://probe.example.com/hook"})
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				require.Empty(t, got.gql.Errors, "%s", got.raw)
				require.Contains(t, string(got.raw), "https://probe.example.com/hook")
			}),
			otherProject: isoNotFound},
		{name: "rotateWebhookDestinationSecret", perm: app.PermissionWebhooksWrite, doc: rotateSecretMutation,
			vars:        func(r isoResources) map[string]any { return in(map[string]any{"destinationId": r.destinationID}) },
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "createWebhookSubscription", perm: app.PermissionWebhooksWrite, doc: createSubscriptionMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"projectId": r.project, "destinationId": r.destinationID,
					"eventTypes": []string{"owner.*"}, "idempotencyKey": isoSubscriptionKey})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "disableWebhookSubscription", perm: app.PermissionWebhooksWrite, doc: disableSubscriptionMutation,
			vars:        func(r isoResources) map[string]any { return in(map[string]any{"subscriptionId": r.subscriptionID}) },
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "redriveWebhookDelivery", perm: app.PermissionDeliveriesRedrive, doc: redriveDeliveryMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"deliveryId": r.deliveryID, "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "requestDataExport", perm: app.PermissionExportsWrite, doc: requestExportMutation,
			vars: func(r isoResources) map[string]any {
				return in(exportInput(map[string]any{"projectId": r.project, "idempotencyKey": isoExportKey}))
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				var data struct {
					RequestDataExport struct{ Export dataExport } `json:"requestDataExport"`
				}
				got.gql.decode(t, &data)
				require.Equal(t, "QUEUED", data.RequestDataExport.Export.State, "a new export of tenant B, not the owner's")
			}),
			otherProject: isoNotFound},
		{name: "expireDataExport", perm: app.PermissionExportsWrite, doc: expireExportMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"exportId": r.exportID, "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "createDataExportDownload", perm: app.PermissionExportsDownload, doc: createDownloadMutation,
			vars:        func(r isoResources) map[string]any { return in(map[string]any{"exportId": r.exportID}) },
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "appendAlarmHistory", perm: app.PermissionHistoryWrite, doc: appendAlarmsMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"projectId": r.project, "entries": []any{alarmEntry(r.alarmEntryID, "probe-alarm")}})
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				require.Equal(t, 1, appended(t, got.gql), "an alarm entry id of tenant A is new in tenant B")
			}),
			otherProject: isoNotFound},
		{name: "appendTelemetryHistory", perm: app.PermissionHistoryWrite, doc: appendTelemetryMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"projectId": r.project, "points": []any{isoTelemetryPoint()}})
			},
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				require.Equal(t, 1, appended(t, got.gql), "tenant A's point is new in tenant B")
			}),
			otherProject: isoNotFound},

		{name: "setAuditRetention", perm: app.PermissionAdmin, doc: isoSetRetention, tenantWide: true,
			vars: func(isoResources) map[string]any { return in(map[string]any{"retentionDays": 30, "confirm": true}) },
			otherTenant: isoOwnWith(func(t *testing.T, e *isoEnv, got *isoGot) {
				require.Contains(t, string(got.raw), `"tenantRetentionDays":30`, "tenant B sets its own window")
			}),
			otherProject: isoExpect{outcome: isoRefused, code: "FORBIDDEN"}},

		// Subscriptions (graphql-transport-ws).
		{name: "auditEventRecorded", perm: app.PermissionAuditRead, doc: isoRecordedSub,
			vars:        func(r isoResources) map[string]any { return map[string]any{"p": r.project, "after": "0"} },
			otherTenant: isoOwnWith(isoLiveGraphQLCheck), otherProject: isoNotFound},
		{name: "dataExportUpdated", perm: app.PermissionExportsRead, doc: exportUpdatedSubscription,
			vars:        func(r isoResources) map[string]any { return map[string]any{"id": r.exportID} },
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "auditChainVerification", perm: app.PermissionAuditRead, doc: isoVerificationSub, vars: project,
			otherTenant: isoOwnWith(isoVerificationCheck), otherProject: isoNotFound},

		// REST and SSE.
		{name: "list", perm: app.PermissionAuditRead, route: "GET /api/v1/audit/events",
			path:        func(r isoResources) string { return "/api/v1/audit/events?projectId=" + r.project },
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "stream", perm: app.PermissionAuditRead, route: "GET /api/v1/audit/events/stream",
			path:        func(r isoResources) string { return "/api/v1/audit/events/stream?projectId=" + r.project },
			otherTenant: isoIsEmpty, otherProject: isoNotFound},
		{name: "stream follow", perm: app.PermissionAuditRead, route: "GET /api/v1/audit/events/stream",
			path:        func(r isoResources) string { return "/api/v1/audit/events/stream?follow=true&projectId=" + r.project },
			otherTenant: isoOwnWith(isoLiveSSECheck), otherProject: isoNotFound},
	}
	rows = append(rows, isoLifecycleRows()...)
	rows = append(rows, isoRecoveryRows(in)...)
	return append(rows, isoStreamRows()...)
}

// isoPublicRoutes are the ServeMux patterns outside the matrix: no data
// behind them ("/" answers 404 to anything else), or covered otherwise
// (/graphql by the schema's fields, the download by its own subtest).
var isoPublicRoutes = map[string]string{
	"GET /healthz":                         "public liveness, no data",
	"GET /readyz":                          "public readiness, no data",
	"/":                                    "404 for every unknown path",
	"/graphql":                             "every Query, Mutation and Subscription field has a row",
	"GET /api/v1/exports/download/{token}": "the download capability subtest",
	"GET /api/v1/openapi.json":             "the public OpenAPI document, no data",
	"GET /.well-known/aether/checkpoint-keys": "the public keys that verify checkpoints, no tenant data",
	"GET /dashboard":           "static files of the dashboard, no data (the page calls /graphql with the user's token)",
	"GET /dashboard/{$}":       "static files of the dashboard, no data",
	"GET /dashboard/{file...}": "static files of the dashboard, no data",
	"GET /graphiql":            "static files of GraphiQL, no data (the page calls /graphql with the user's token)",
	"GET /graphiql/{$}":        "static files of GraphiQL, no data",
	"GET /graphiql/{file...}":  "static files of GraphiQL, no data",
	"GET /metrics":             "operator surface, admin only (operator_test.go): operators see every tenant's figures (the stream metrics carry tenant, stream and project labels), tenants never",
	"GET /riverui/sign-in":     "operator surface: the sign-in form, no data",
	"POST /riverui/sign-in":    "operator surface, admin only (operator_test.go)",
	"POST /riverui/sign-out":   "operator surface: clears the cookie",
	"/riverui/":                "operator surface, admin only (operator_test.go)",
}

// isoGot is one answer of a cell.
type isoGot struct {
	token  string // the caller's
	status int
	header http.Header
	raw    []byte
	gql    *gqlResult // the decoded raw of a GraphQL answer
	// ws and opID: a subscription the cell opened.
	ws   *wsClient
	opID string
	// live: a follow stream the cell opened.
	live *liveStream
}

// isoEnv is the server with tenant A's resources.
type isoEnv struct {
	*testBundle
	app      *app.App
	pool     *pgxpool.Pool
	owner    string // tenant A, project A, every permission
	ownerAll string // tenant A, every project and permission (for tenant-wide settings)
	res      isoResources
	perms    []app.Permission
	markers  []string // owner data no other identity may ever see
	download string   // the owner's download URL
	digest   string   // the owner's export's contentDigest
}

// setupIsolation serves a fresh server over a fresh database with
// everything configured: live hub, webhooks, exports over a file bucket.
func setupIsolation(t *testing.T) *isoEnv {
	t.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	secret := []byte("0123456789abcdef0123456789abcdef-isolation-test")
	verifier := testVerifier(t, secret)
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	bucket, err := export.OpenBucket(ctx, "file://"+t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := testHub(t, pool, store.New(pool), live.Config{Logger: logger})

	application := app.New(store.New(pool), app.Config{
		Logger: logger, Live: hub, ExportWatch: hub,
		Webhooks:    app.WebhookConfig{Box: box},
		Exports:     app.ExportConfig{Bucket: bucket, DownloadKey: exportDownloadKey},
		Checkpoints: testKeyRing(t),
	})
	b := &testBundle{secret: secret, ready: &atomic.Pointer[error]{}}
	b.server = server.New(server.Config{App: application, Verifier: verifier, Logger: logger})
	srv := httptest.NewServer(b.server)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return &isoEnv{testBundle: b, app: application, pool: pool}
}

// seed creates one of everything in tenant A, project A, as the owner.
func (e *isoEnv) seed(t *testing.T) {
	t.Helper()
	e.owner = e.token(t, tokenOpts{perms: e.perms})
	first := eventInput(projectA, "owner.secret.recorded")
	first["subject"] = map[string]any{"type": "USER", "id": "owner-secret-user"}
	first["details"] = map[string]any{"note": "owner-secret-detail"}
	res := e.graphql(t, e.owner, recordEventsMutation, map[string]any{"in": map[string]any{
		"events": []any{first}, "idempotencyKey": isoBatchKey}})
	var batch struct {
		RecordAuditEvents struct{ Events []event } `json:"recordAuditEvents"`
	}
	res.decode(t, &batch)
	ev1 := batch.RecordAuditEvents.Events[0]

	res = e.graphql(t, e.owner, createDestinationMutation, map[string]any{"in": map[string]any{
		"projectId": projectA, "url": "https://owner-secret.example.com/hook", "description": "owner-secret-destination"}})
	var dest struct {
		CreateWebhookDestination struct {
			Destination   whDestination `json:"destination"`
			SigningSecret string        `json:"signingSecret"`
		} `json:"createWebhookDestination"`
	}
	res.decode(t, &dest)
	destination, signing := dest.CreateWebhookDestination.Destination, dest.CreateWebhookDestination.SigningSecret

	res = e.graphql(t, e.owner, createSubscriptionMutation, map[string]any{"in": map[string]any{
		"projectId": projectA, "destinationId": destination.ID, "eventTypes": []string{"owner.*"},
		"description": "owner-secret-subscription", "idempotencyKey": isoSubscriptionKey}})
	var sub struct {
		CreateWebhookSubscription struct{ Subscription whSubscription } `json:"createWebhookSubscription"`
	}
	res.decode(t, &sub)
	subscription := sub.CreateWebhookSubscription.Subscription

	ev2 := e.record(t, e.owner, eventInput(projectA, "owner.secret.delivered"))[0]
	created, err := e.app.FanOutWebhookDeliveries(context.Background(), jobargs.WebhookFanoutArgs{
		TenantID: tenantA, ProjectID: projectA, FromSequence: 1, ToSequence: 1000})
	require.NoError(t, err)
	require.Equal(t, 1, created)
	res = e.graphql(t, e.owner, deliveriesQuery, map[string]any{"p": projectA})
	var deliveries struct {
		WebhookDeliveries struct {
			Edges []struct {
				Node struct {
					ID             string `json:"id"`
					EventID        string `json:"eventId"`
					IdempotencyKey string `json:"idempotencyKey"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"webhookDeliveries"`
	}
	res.decode(t, &deliveries)
	require.Len(t, deliveries.WebhookDeliveries.Edges, 1)
	delivery := deliveries.WebhookDeliveries.Edges[0].Node
	require.Equal(t, ev2.ID, delivery.EventID)

	alarmID := uuid.NewString()
	res = e.graphql(t, e.owner, appendAlarmsMutation, map[string]any{"in": map[string]any{
		"projectId": projectA, "entries": []any{alarmEntry(alarmID, "owner-secret-alarm")}}})
	require.Equal(t, 1, appended(t, res))
	res = e.graphql(t, e.owner, appendTelemetryMutation, map[string]any{"in": map[string]any{
		"projectId": projectA, "points": []any{isoTelemetryPoint()}}})
	require.Equal(t, 1, appended(t, res))

	res = e.graphql(t, e.owner, requestExportMutation, map[string]any{"in": exportInput(map[string]any{"idempotencyKey": isoExportKey})})
	var req struct {
		RequestDataExport struct{ Export dataExport } `json:"requestDataExport"`
	}
	res.decode(t, &req)
	exportID := req.RequestDataExport.Export.ID
	eid := uuid.MustParse(exportID)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.app.RunDataExport(ctx, app.DataExportRun{
		Args: jobargs.DataExportJobArgs{TenantID: tenantA, ExportID: eid}, Attempt: 1, MaxAttempts: 3}))
	res = e.graphql(t, e.owner, exportQuery, map[string]any{"id": exportID})
	var got struct {
		DataExport *dataExport `json:"dataExport"`
	}
	res.decode(t, &got)
	require.NotNil(t, got.DataExport)
	require.Equal(t, "READY", got.DataExport.State)
	e.digest = *got.DataExport.ContentDigest

	res = e.graphql(t, e.owner, createDownloadMutation, map[string]any{"in": map[string]any{"exportId": exportID}})
	var dl struct {
		CreateDataExportDownload struct{ URL string } `json:"createDataExportDownload"`
	}
	res.decode(t, &dl)
	e.download = e.url + dl.CreateDataExportDownload.URL // relative: no public URL is set
	_, capability := tokenOfURL(t, e.download)

	e.res = isoResources{
		project: projectA, eventID: ev1.ID, event2ID: ev2.ID, destinationID: destination.ID,
		subscriptionID: subscription.ID, deliveryID: delivery.ID, exportID: exportID, alarmEntryID: alarmID,
	}
	e.seedStreams(t)
	// The owner's tenant keeps events for 10 years.
	e.ownerAll = e.token(t, tokenOpts{projects: []string{app.AllProjects}, perms: e.perms})
	res = e.graphql(t, e.ownerAll, isoSetRetention, map[string]any{"in": map[string]any{"retentionDays": isoOwnerRetentionDays, "confirm": true}})
	require.Empty(t, res.Errors)

	res = e.graphql(t, e.owner, isoCreateCheckpoint, map[string]any{"in": map[string]any{"projectId": projectA}})
	var cp struct {
		CreateAuditCheckpoint struct{ Checkpoint struct{ JWS string } } `json:"createAuditCheckpoint"`
	}
	res.decode(t, &cp)
	require.NotEmpty(t, cp.CreateAuditCheckpoint.Checkpoint.JWS)

	signingKey, _ := strings.CutPrefix(signing, "whsec_")
	e.markers = []string{cp.CreateAuditCheckpoint.Checkpoint.JWS,
		fmt.Sprintf(`"tenantRetentionDays":%d`, isoOwnerRetentionDays),
		tenantA, "owner.secret", "owner-secret", ev1.ID, ev1.ChainHash, ev2.ID, ev2.ChainHash,
		destination.ID, signing, signingKey, subscription.ID, delivery.ID, delivery.IdempotencyKey,
		exportID, *got.DataExport.ObjectRef, e.digest, strings.TrimPrefix(e.digest, "sha256:"), alarmID, capability,
	}
	// The chain's head hash is owner data too.
	res = e.graphql(t, e.owner, isoVerifyQuery, map[string]any{"p": projectA})
	var chain struct {
		VerifyAuditChain struct{ HeadHash string } `json:"verifyAuditChain"`
	}
	res.decode(t, &chain)
	e.markers = append(e.markers, chain.VerifyAuditChain.HeadHash)
	for _, m := range e.markers {
		require.NotEmpty(t, m)
	}
}

// hasMarker reports whether raw holds owner data.
func (e *isoEnv) hasMarker(raw []byte) bool {
	return slices.ContainsFunc(e.markers, func(m string) bool { return bytes.Contains(raw, []byte(m)) })
}

// tokenFor mints the token of who for row (empty for isoNoToken).
func (e *isoEnv) tokenFor(t *testing.T, who isoIdentity, row isoRow) string {
	t.Helper()
	switch who {
	case isoOtherTenant:
		return e.token(t, tokenOpts{tenant: tenantB, projects: []string{app.AllProjects}, perms: e.perms})
	case isoOtherProject:
		return e.token(t, tokenOpts{projects: []string{projectB}, perms: e.perms})
	case isoNoPermission:
		var perms []app.Permission
		for _, p := range e.perms {
			if p != row.perm && !slices.Contains(row.orPerms, p) {
				perms = append(perms, p)
			}
		}
		return e.token(t, tokenOpts{perms: perms})
	case isoExpired:
		return e.token(t, tokenOpts{perms: e.perms, ttl: time.Second, now: time.Now().Add(-time.Hour)})
	default:
		return ""
	}
}

// requireNoLeak fails when raw contains owner data that request (what the
// caller sent) does not; except lists markers allowed anyway.
func (e *isoEnv) requireNoLeak(t *testing.T, raw, request []byte, except ...string) {
	t.Helper()
	for _, m := range e.markers {
		if bytes.Contains(request, []byte(m)) || slices.Contains(except, m) {
			continue
		}
		require.NotContains(t, string(raw), m, "owner data in a response to another identity")
	}
}

// fingerprint digests every row of every tenant-scoped table, and River's
// jobs, except tenant B's (which may change: its own project).
func (e *isoEnv) fingerprint(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, `SELECT table_name FROM information_schema.columns
WHERE table_schema = current_schema() AND column_name = 'tenant_id' ORDER BY table_name`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "audit_events")
	queries := map[string]string{}
	for _, table := range tables {
		id := pgx.Identifier{table}.Sanitize()
		queries[table] = `SELECT count(*), coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '') FROM ` + id +
			` x WHERE tenant_id <> '` + tenantB + `'`
	}
	queries["river_job"] = `SELECT count(*), coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '') FROM river_job x
WHERE coalesce(x.args->>'tenant_id', '') <> '` + tenantB + `'`
	out := map[string]string{}
	for name, q := range queries {
		var n int
		var sum string
		require.NoError(t, e.pool.QueryRow(ctx, q).Scan(&n, &sum), name)
		out[name] = strconv.Itoa(n) + " rows " + sum
	}
	return out
}

// ownerView is what the owner's GraphQL queries answer.
func (e *isoEnv) ownerView(t *testing.T, rows []isoRow, kinds map[string]gqlast.Operation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, row := range rows {
		if row.doc == "" || kinds[row.name] != gqlast.Query {
			continue
		}
		owner := e.owner
		if row.tenantWide {
			owner = e.ownerAll
		}
		res := e.graphql(t, owner, row.doc, row.vars(e.res))
		require.Empty(t, res.Errors, "%s: %s", row.name, res.Raw)
		out[row.name] = string(res.Raw)
	}
	return out
}

// TestTenantIsolationMatrix: every operation of the API, called by another
// tenant, another project of the same tenant, without the needed
// permission, with an expired and with no token, is refused with the
// documented code and reveals nothing; refused commands write nothing.
func TestTenantIsolationMatrix(t *testing.T) {
	t.Parallel()
	schema := isoLoadSchema(t)
	rows := isoRows()
	kinds := isoRowKinds(t, schema, rows)

	t.Run("EveryOperationHasARow", func(t *testing.T) {
		var missing []string
		for _, def := range []*gqlast.Definition{schema.Query, schema.Mutation, schema.Subscription} {
			if def == nil {
				continue
			}
			for _, f := range def.Fields {
				if strings.HasPrefix(f.Name, "__") {
					continue
				}
				if !slices.ContainsFunc(rows, func(r isoRow) bool { return r.doc != "" && r.name == f.Name }) {
					missing = append(missing, def.Name+"."+f.Name)
				}
			}
		}
		require.Empty(t, missing, "GraphQL operations without a row in isoRows")
	})
	t.Run("EveryRouteHasARow", func(t *testing.T) {
		var missing []string
		for _, route := range isoServerRoutes(t) {
			_, public := isoPublicRoutes[route]
			if !public && !slices.ContainsFunc(rows, func(r isoRow) bool { return r.route == route }) {
				missing = append(missing, route)
			}
		}
		require.Empty(t, missing, "HTTP routes without a row in isoRows (or an entry in isoPublicRoutes)")
	})

	e := setupIsolation(t)
	e.perms = isoAllPermissions(rows)
	e.seed(t)

	// The owner gets what the others are refused (the matrix is not
	// vacuous): every read answers with owner data.
	for _, row := range rows {
		if row.doc != "" && kinds[row.name] == gqlast.Mutation {
			continue
		}
		owner := e.owner
		if row.tenantWide {
			owner = e.ownerAll
		}
		got := e.call(t, row, kinds[row.name], owner, e.res, "owner", true)
		switch {
		case got.ws != nil:
			msg := got.ws.read()
			require.Equal(t, "next", msg["type"], "%s: %v", row.name, msg)
			if row.name == "auditChainVerification" { // the owner's head hash
				require.True(t, e.hasMarker([]byte(mustJSON(t, msg["payload"]))), "%s: no owner data in %v", row.name, msg)
				continue
			}
			want := e.res.eventID
			if row.name == "dataExportUpdated" {
				want = e.res.exportID
			}
			require.Contains(t, mustJSON(t, msg["payload"]), want, row.name)
		case got.live != nil:
			f, ok := got.live.next()
			require.True(t, ok, row.name)
			require.Contains(t, f.data, e.res.eventID, row.name)
		default:
			require.Equal(t, http.StatusOK, got.status, "%s: %s", row.name, got.raw)
			require.True(t, e.hasMarker(got.raw), "%s: no owner data in %s", row.name, got.raw)
		}
	}

	before := e.fingerprint(t)
	view := e.ownerView(t, rows, kinds)
	runPhase := func(phase int) {
		for _, row := range rows {
			if isoPhase(row, kinds) != phase {
				continue
			}
			name := row.name
			if row.route != "" {
				name = row.route + " " + row.name
			}
			t.Run(name, func(t *testing.T) {
				for _, who := range isoIdentities {
					t.Run(string(who), func(t *testing.T) { e.cell(t, row, kinds[row.name], who) })
				}
			})
		}
	}
	// Reads first, then commands: tenant B's commands fill its own
	// project of the owner's project's name, which its reads must find as
	// empty as a never-used one.
	runPhase(0)
	t.Run("DownloadCapability", e.downloadCells)
	runPhase(1)
	t.Run("RefusalsWroteNothing", func(t *testing.T) {
		require.Equal(t, before, e.fingerprint(t), "rows outside tenant B changed")
		require.Equal(t, view, e.ownerView(t, rows, kinds), "the owner's resources changed")
		resp, body := fetch(t, e.download)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		sum := sha256.Sum256(body)
		require.Equal(t, e.digest, "sha256:"+hex.EncodeToString(sum[:]), "the owner's download still works")
	})
	// Live streams last: their checks record new events.
	runPhase(2)
}

// isoPhase orders the rows: reads (0), commands (1), live streams (2).
func isoPhase(row isoRow, kinds map[string]gqlast.Operation) int {
	if row.route != "" {
		if row.otherTenant.outcome == isoOwn {
			return 2
		}
		return 0
	}
	switch kinds[row.name] {
	case gqlast.Mutation:
		return 1
	case gqlast.Subscription:
		return 2
	default:
		return 0
	}
}

// expectFor is what who gets from row.
func (row isoRow) expectFor(who isoIdentity) isoExpect {
	switch who {
	case isoOtherTenant:
		return row.otherTenant
	case isoOtherProject:
		return row.otherProject
	case isoNoPermission:
		return isoExpect{outcome: isoRefused, code: "FORBIDDEN"}
	default:
		return isoExpect{outcome: isoRefused, code: "UNAUTHENTICATED"}
	}
}

// cell runs one row as one identity and checks the answer.
func (e *isoEnv) cell(t *testing.T, row isoRow, kind gqlast.Operation, who isoIdentity) {
	tok := e.tokenFor(t, who, row)
	want := row.expectFor(who)
	authenticated := who != isoExpired && who != isoNoToken
	got := e.call(t, row, kind, tok, e.res, "real", authenticated)
	request := isoRequest(t, row, e.res)
	if want.outcome == isoOwn {
		require.NotNil(t, want.check, "row %s: an isoOwn expectation needs a check", row.name)
		want.check(t, e, got)
		e.requireNoLeak(t, got.raw, request)
		return
	}

	if got.ws != nil { // a refusal on an open socket
		require.Equal(t, isoRefused, want.outcome, "row %s: a subscription refuses or is tenant B's own", row.name)
		payload := isoWSError(t, got.ws, got.opID, want.code)
		if who == isoNoPermission {
			require.Contains(t, payload, "missing permission "+string(row.perm))
		}
		e.requireNoLeak(t, []byte(payload), request)
		for i, miss := range isoMisses(row) {
			opID := "miss-" + strconv.Itoa(i)
			got.ws.send(map[string]any{"id": opID, "type": "subscribe", "payload": map[string]any{"query": row.doc, "variables": row.vars(miss)}})
			require.Equal(t, payload, isoWSError(t, got.ws, opID, want.code), "the same as naming a missing resource")
		}
		return
	}

	switch want.outcome {
	case isoRefused:
		require.Equal(t, want.code, got.code(t), "%s", got.raw)
		status := app.Code(want.code).HTTPStatus()
		if got.gql != nil {
			if want.code != "UNAUTHENTICATED" {
				status = http.StatusOK // GraphQL errors of the resolvers
			}
			require.Contains(t, []string{"", "null", `{"` + row.name + `":null}`}, string(got.gql.Data), "%s", got.raw)
		}
		require.Equal(t, status, got.status, "%s", got.raw)
		switch who {
		case isoExpired, isoNoToken:
			require.Contains(t, got.header.Get("WWW-Authenticate"), "Bearer")
			msg := "a bearer token is required"
			if who == isoExpired {
				msg = "token expired"
			}
			require.Contains(t, string(got.raw), msg)
			if kind == gqlast.Subscription {
				// Nor does a socket open.
				c := e.dialWS(t, "")
				init := map[string]any{"type": "connection_init"}
				if tok != "" {
					init["payload"] = map[string]any{"Authorization": "Bearer " + tok}
				}
				c.send(init)
				require.Equal(t, 4403, c.closeCode())
			}
		case isoNoPermission:
			require.Contains(t, string(got.raw), "missing permission "+string(row.perm))
		}
	case isoNull:
		require.Empty(t, got.gql.Errors, "%s", got.raw)
		require.JSONEq(t, `{"`+row.name+`": null}`, string(got.gql.Data))
	case isoEmpty:
		require.Equal(t, http.StatusOK, got.status, "%s", got.raw)
		if got.gql != nil {
			require.Empty(t, got.gql.Errors, "%s", got.raw)
		}
	default:
		t.Fatalf("row %s: no expectation for %s", row.name, who)
	}
	e.requireNoLeak(t, got.raw, request)
	// Reveals nothing: byte for byte the answer about a missing resource
	// (no answer carries a request-specific field).
	for _, miss := range isoMisses(row) {
		other := e.call(t, row, kind, tok, miss, "miss", false)
		require.Equal(t, got.status, other.status)
		require.Equal(t, string(other.raw), string(got.raw), "the same as naming a missing resource")
	}
}

// isoMisses are the missing resources a refusal must look like.
func isoMisses(row isoRow) []isoResources {
	out := []isoResources{isoMissing(false)}
	if row.malformedIDs {
		out = append(out, isoMissing(true))
	}
	return out
}

// isoRequest is what a caller sends for row about r (GraphQL variables or
// the path): owner data in it may come back without being a leak.
func isoRequest(t *testing.T, row isoRow, r isoResources) []byte {
	t.Helper()
	if row.route != "" {
		return []byte(row.path(r))
	}
	raw, err := json.Marshal(row.vars(r))
	require.NoError(t, err)
	return raw
}

// call makes row's request about r with tok. With open set, a
// subscription is opened on a WebSocket and a follow stream is left open
// when it answers 200; else they go over plain HTTP (refusals do not
// stream).
func (e *isoEnv) call(t *testing.T, row isoRow, kind gqlast.Operation, tok string, r isoResources, opID string, open bool) *isoGot {
	t.Helper()
	got := &isoGot{token: tok}
	if row.route != "" {
		if open && strings.Contains(row.path(r), "follow=true") {
			got.live = e.openLive(t, tok, row.path(r))
			got.status, got.header = got.live.resp.StatusCode, got.live.resp.Header
			if got.status == http.StatusOK {
				return got
			}
			raw, err := io.ReadAll(got.live.resp.Body)
			require.NoError(t, err)
			got.raw, got.live = raw, nil
			return got
		}
		resp := e.getPath(t, tok, row.path(r))
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		got.status, got.header, got.raw = resp.StatusCode, resp.Header, raw
		return got
	}
	if open && kind == gqlast.Subscription {
		got.ws = e.dialWS(t, tok)
		got.opID = opID
		got.ws.send(map[string]any{"id": opID, "type": "subscribe", "payload": map[string]any{"query": row.doc, "variables": row.vars(r)}})
		return got
	}
	res := e.graphql(t, tok, row.doc, row.vars(r))
	got.status, got.header, got.raw, got.gql = res.Status, res.Header, res.Raw, res
	return got
}

// code is the error code of a GraphQL answer (its only error) or of a
// problem+json one.
func (g *isoGot) code(t *testing.T) string {
	t.Helper()
	if g.gql != nil {
		return g.gql.code(t)
	}
	require.Equal(t, "application/problem+json", g.header.Get("Content-Type"), "%s", g.raw)
	var p problemBody
	require.NoError(t, json.Unmarshal(g.raw, &p), "%s", g.raw)
	require.Equal(t, g.status, p.Status)
	require.Equal(t, "https://aether.invalid/problems/"+p.Code, p.Type)
	return p.Code
}

// isoWSError reads the refusal of subscription opID (a "next" with the
// error then "complete", or an "error") and returns its payload.
func isoWSError(t *testing.T, c *wsClient, opID, code string) string {
	t.Helper()
	msg := c.read()
	require.Equal(t, opID, msg["id"], "%v", msg)
	require.Contains(t, []any{"next", "error"}, msg["type"], "%v", msg)
	payload := mustJSON(t, msg["payload"])
	var p struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if msg["type"] == "error" {
		require.NoError(t, json.Unmarshal([]byte(payload), &p.Errors), payload)
	} else {
		require.NoError(t, json.Unmarshal([]byte(payload), &p), payload)
		require.Contains(t, []string{"", "null"}, string(p.Data), "a refusal carries no data")
		done := c.read()
		require.Equal(t, "complete", done["type"], "%v", done)
		require.Equal(t, opID, done["id"])
	}
	require.Len(t, p.Errors, 1, payload)
	require.Equal(t, code, p.Errors[0].Extensions["code"], payload)
	return payload
}

// isoLiveGraphQLCheck: tenant B's subscription to its own project of the
// owner's project's name (from sequence 0) carries tenant B's events only,
// neither the owner's committed ones nor one the owner records now.
func isoLiveGraphQLCheck(t *testing.T, e *isoEnv, got *isoGot) {
	t.Helper()
	require.NotNil(t, got.ws)
	e.record(t, e.owner, eventInput(projectA, "owner.secret.live"))
	const marker = "probe.live.graphql"
	e.record(t, got.token, eventInput(projectA, marker))
	for {
		msg := got.ws.read()
		require.Equal(t, "next", msg["type"], "%v", msg)
		payload := mustJSON(t, msg["payload"])
		var p struct {
			Data struct {
				AuditEventRecorded event `json:"auditEventRecorded"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(payload), &p))
		require.Equal(t, tenantB, p.Data.AuditEventRecorded.TenantID, payload)
		// Tenant B's own probe events reuse the owner's event ids.
		e.requireNoLeak(t, []byte(payload), nil, e.res.eventID, e.res.event2ID)
		if p.Data.AuditEventRecorded.Action == marker {
			return
		}
	}
}

// isoVerificationCheck: tenant B's verification of its own project of the
// owner's project's name verifies tenant B's chain (its probe events) and
// says nothing of the owner's.
func isoVerificationCheck(t *testing.T, e *isoEnv, got *isoGot) {
	t.Helper()
	require.NotNil(t, got.ws)
	var last string
	for {
		msg := got.ws.read()
		if msg["type"] == "complete" {
			require.Contains(t, last, `"complete":true,`)
			require.Contains(t, last, `"valid":true`)
			return
		}
		require.Equal(t, "next", msg["type"], "%v", msg)
		last = mustJSON(t, msg["payload"])
		e.requireNoLeak(t, []byte(last), nil)
	}
}

// isoLiveSSECheck is isoLiveGraphQLCheck for the follow stream.
func isoLiveSSECheck(t *testing.T, e *isoEnv, got *isoGot) {
	t.Helper()
	require.NotNil(t, got.live)
	e.record(t, e.owner, eventInput(projectA, "owner.secret.live"))
	const marker = "probe.live.sse"
	e.record(t, got.token, eventInput(projectA, marker))
	for {
		f, ok := got.live.next()
		require.True(t, ok, "the stream ended before tenant B's event")
		require.Equal(t, "audit", f.event, "%+v", f)
		var ev event
		require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
		require.Equal(t, tenantB, ev.TenantID, f.data)
		e.requireNoLeak(t, []byte(f.data), nil, e.res.eventID, e.res.event2ID)
		if ev.Action == marker {
			return
		}
	}
}

// downloadCells: the download capability is the credential of
// GET /api/v1/exports/download/{token}, so the five identities are five
// forgeries of it. Each is refused with 403 FORBIDDEN, byte for byte like
// a genuine capability of an export that does not exist.
func (e *isoEnv) downloadCells(t *testing.T) {
	prefix, capability := tokenOfURL(t, e.download)
	eid := uuid.MustParse(e.res.exportID)
	later := time.Now().Add(10 * time.Minute)
	refusal := func(t *testing.T, token string) []byte {
		t.Helper()
		resp, body := fetch(t, prefix+token)
		got := &isoGot{status: resp.StatusCode, header: resp.Header, raw: body}
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
		require.Equal(t, "FORBIDDEN", got.code(t))
		require.NotContains(t, string(body), token, "the problem never names the capability")
		e.requireNoLeak(t, body, []byte(token))
		return body
	}
	miss := refusal(t, export.SignDownload(exportDownloadKey, uuid.New(), tenantA, later))
	for _, c := range []struct {
		who   isoIdentity
		token string
	}{
		// The owner's export, signed for tenant B.
		{isoOtherTenant, export.SignDownload(exportDownloadKey, eid, tenantB, later)},
		// Capabilities carry no project: the owner's, altered.
		{isoOtherProject, flipAt(capability, 5)},
		// Signed with another key.
		{isoNoPermission, export.SignDownload([]byte("another-download-key-another-download-key"), eid, tenantA, later)},
		{isoExpired, export.SignDownload(exportDownloadKey, eid, tenantA, time.Now().Add(-time.Minute))},
		{isoNoToken, "not-a-capability"},
	} {
		t.Run(string(c.who), func(t *testing.T) {
			require.Equal(t, string(miss), string(refusal(t, c.token)), "the same as a capability of a missing export")
		})
	}
	t.Run("EmptyToken", func(t *testing.T) {
		resp, body := fetch(t, prefix)
		got := &isoGot{status: resp.StatusCode, header: resp.Header, raw: body}
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
		require.Equal(t, "NOT_FOUND", got.code(t))
		e.requireNoLeak(t, body, nil)
	})
}

// isoLoadSchema parses schema/*.graphqls.
func isoLoadSchema(t *testing.T) *gqlast.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "schema", "*.graphqls"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var sources []*gqlast.Source
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		sources = append(sources, &gqlast.Source{Name: f, Input: string(raw)})
	}
	schema, err := gqlparser.LoadSchema(sources...)
	require.NoError(t, err)
	return schema
}

// isoRowKinds validates every GraphQL row's document against the schema,
// requires its one root field to be the row's, and returns each row's
// operation type.
func isoRowKinds(t *testing.T, schema *gqlast.Schema, rows []isoRow) map[string]gqlast.Operation {
	t.Helper()
	out := map[string]gqlast.Operation{}
	for _, row := range rows {
		if row.doc == "" {
			require.NotEmpty(t, row.route, "row %s has neither a document nor a route", row.name)
			require.NotNil(t, row.path, row.name)
			continue
		}
		require.NotNil(t, row.vars, row.name)
		doc, errs := gqlparser.LoadQuery(schema, row.doc)
		require.Empty(t, errs, "row %s", row.name)
		require.Len(t, doc.Operations, 1, row.name)
		op := doc.Operations[0]
		require.Len(t, op.SelectionSet, 1, row.name)
		field, ok := op.SelectionSet[0].(*gqlast.Field)
		require.True(t, ok, row.name)
		require.Equal(t, row.name, field.Name, "row %s queries another field", row.name)
		_, dup := out[row.name]
		require.False(t, dup, "two rows for %s", row.name)
		out[row.name] = op.Operation
	}
	return out
}

// isoServerRoutes lists the ServeMux patterns the server registers: the
// string literals passed to mux.Handle and mux.HandleFunc in the package's
// source.
func isoServerRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var routes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			if recv, ok := sel.X.(*ast.SelectorExpr); !ok || recv.Sel.Name != "mux" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			require.True(t, ok, "%s: a route that is not a string literal", fset.Position(call.Pos()))
			route, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			routes = append(routes, route)
			return true
		})
	}
	require.Contains(t, routes, "/graphql", "the route scan found the routes")
	return routes
}

// isoAllPermissions is every permission: the product's and any a row needs.
func isoAllPermissions(rows []isoRow) []app.Permission {
	perms := []app.Permission{
		app.PermissionAuditRead, app.PermissionAuditWrite, app.PermissionWebhooksRead, app.PermissionWebhooksWrite,
		app.PermissionDeliveriesRedrive, app.PermissionExportsRead, app.PermissionExportsWrite,
		app.PermissionExportsDownload, app.PermissionHistoryWrite, app.PermissionAdmin,
	}
	for _, row := range rows {
		if !slices.Contains(perms, row.perm) {
			perms = append(perms, row.perm)
		}
	}
	return perms
}
