package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
)

// exportDownloadKey signs the download capabilities of setupExports' app.
var exportDownloadKey = []byte("0123456789abcdef0123456789abcdef-export-download-key")

// exportBundle is a server whose app can run data exports (a bucket, a
// download key and the live hub as export watcher), with the app at hand to
// run an export's job, which this server runs no worker for.
type exportBundle struct {
	*testBundle
}

// setupExports serves a fresh server over a fresh database, like setup,
// with an app configured for data exports over a file bucket in a temporary
// directory. mutate, when given, adjusts the export configuration.
func setupExports(t *testing.T, mutate func(*app.ExportConfig)) *exportBundle {
	t.Helper()
	bucket, err := export.OpenBucket(context.Background(), "file://"+t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	cfg := app.ExportConfig{Bucket: bucket, DownloadKey: exportDownloadKey}
	if mutate != nil {
		mutate(&cfg)
	}
	return &exportBundle{testBundle: setupApp(t, app.Config{Exports: cfg}, nil)}
}

// allExportPerms is every permission the export API and its setup use.
var allExportPerms = []app.Permission{
	app.PermissionAuditRead, app.PermissionAuditWrite,
	app.PermissionExportsRead, app.PermissionExportsWrite, app.PermissionExportsDownload,
	app.PermissionHistoryWrite,
}

// exportPermsWithout is allExportPerms without p.
func exportPermsWithout(p app.Permission) []app.Permission {
	var out []app.Permission
	for _, q := range allExportPerms {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// The default range of the tests' exports; eventInput's events (2026-01-02)
// fall into it.
const (
	exportFrom = "2026-01-01T00:00:00Z"
	exportTo   = "2026-01-08T00:00:00Z"
)

const (
	exportFields = `id projectId kind format compression from to state requestedAt startedAt progressRows progressBytes
  objectRef contentDigest byteLength rowCount readyAt expiresAt failedAt failureReason expiredAt`

	requestExportMutation = `mutation($in: RequestDataExportInput!) {
  requestDataExport(input: $in) { export { ` + exportFields + ` } }
}`
	expireExportMutation = `mutation($in: ExpireDataExportInput!) {
  expireDataExport(input: $in) { export { ` + exportFields + ` } }
}`
	createDownloadMutation = `mutation($in: CreateDataExportDownloadInput!) {
  createDataExportDownload(input: $in) { url expiresAt }
}`
	appendAlarmsMutation = `mutation($in: AppendAlarmHistoryInput!) {
  appendAlarmHistory(input: $in) { appended }
}`
	appendTelemetryMutation = `mutation($in: AppendTelemetryHistoryInput!) {
  appendTelemetryHistory(input: $in) { appended }
}`
	exportQuery  = `query($id: ID!) { dataExport(id: $id) { ` + exportFields + ` } }`
	exportsQuery = `query($p: ID!, $filter: DataExportFilter, $first: Int, $after: String) {
  dataExports(projectId: $p, filter: $filter, first: $first, after: $after) {
    edges { cursor node { ` + exportFields + ` } }
    pageInfo { hasNextPage endCursor }
  }
}`
	exportUpdatedSubscription = `subscription($id: ID!) { dataExportUpdated(exportId: $id) { ` + exportFields + ` } }`
)

// dataExport is a DataExport as the API returns it.
type dataExport struct {
	ID            string  `json:"id"`
	ProjectID     string  `json:"projectId"`
	Kind          string  `json:"kind"`
	Format        string  `json:"format"`
	Compression   string  `json:"compression"`
	From          string  `json:"from"`
	To            string  `json:"to"`
	State         string  `json:"state"`
	RequestedAt   string  `json:"requestedAt"`
	StartedAt     *string `json:"startedAt"`
	ProgressRows  string  `json:"progressRows"`
	ProgressBytes string  `json:"progressBytes"`
	ObjectRef     *string `json:"objectRef"`
	ContentDigest *string `json:"contentDigest"`
	ByteLength    *string `json:"byteLength"`
	RowCount      *string `json:"rowCount"`
	ReadyAt       *string `json:"readyAt"`
	ExpiresAt     *string `json:"expiresAt"`
	FailedAt      *string `json:"failedAt"`
	FailureReason *string `json:"failureReason"`
	ExpiredAt     *string `json:"expiredAt"`
}

// exportInput is a confirmed RequestDataExportInput of an NDJSON audit
// export of project A over the default range; extra overrides fields.
func exportInput(extra map[string]any) map[string]any {
	in := map[string]any{
		"projectId": projectA, "kind": "AUDIT", "from": exportFrom, "to": exportTo,
		"format": "NDJSON", "compression": "NONE", "confirm": true,
	}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// requestExport runs requestDataExport, failing on any error.
func (b *exportBundle) requestExport(t *testing.T, token string, in map[string]any) dataExport {
	t.Helper()
	res := b.graphql(t, token, requestExportMutation, map[string]any{"in": in})
	var data struct {
		RequestDataExport struct {
			Export dataExport `json:"export"`
		} `json:"requestDataExport"`
	}
	res.decode(t, &data)
	return data.RequestDataExport.Export
}

// expireExport runs expireDataExport with confirm, failing on any error.
func (b *exportBundle) expireExport(t *testing.T, token, id string) dataExport {
	t.Helper()
	res := b.graphql(t, token, expireExportMutation, map[string]any{"in": map[string]any{"exportId": id, "confirm": true}})
	var data struct {
		ExpireDataExport struct {
			Export dataExport `json:"export"`
		} `json:"expireDataExport"`
	}
	res.decode(t, &data)
	return data.ExpireDataExport.Export
}

// runExport runs an export's job directly, as a worker's first attempt.
func (b *exportBundle) runExport(t *testing.T, tenant, id string) {
	t.Helper()
	eid, err := uuid.Parse(id)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.app.RunDataExport(ctx, app.DataExportRun{
		Args: jobargs.DataExportJobArgs{TenantID: tenant, ExportID: eid}, Attempt: 1, MaxAttempts: 3,
	}))
}

// getExport reads one export; nil when the API answers null.
func (b *exportBundle) getExport(t *testing.T, token, id string) *dataExport {
	t.Helper()
	res := b.graphql(t, token, exportQuery, map[string]any{"id": id})
	var data struct {
		DataExport *dataExport `json:"dataExport"`
	}
	res.decode(t, &data)
	return data.DataExport
}

// listExports lists (the first 100 of) a project's exports.
func (b *exportBundle) listExports(t *testing.T, token, project string) []dataExport {
	t.Helper()
	res := b.graphql(t, token, exportsQuery, map[string]any{"p": project, "first": 100})
	var data struct {
		DataExports struct {
			Edges []struct {
				Cursor string     `json:"cursor"`
				Node   dataExport `json:"node"`
			} `json:"edges"`
			PageInfo struct {
				HasNextPage bool `json:"hasNextPage"`
			} `json:"pageInfo"`
		} `json:"dataExports"`
	}
	res.decode(t, &data)
	require.False(t, data.DataExports.PageInfo.HasNextPage)
	out := make([]dataExport, len(data.DataExports.Edges))
	for i, e := range data.DataExports.Edges {
		require.NotEmpty(t, e.Cursor)
		out[i] = e.Node
	}
	return out
}

// createDownload mints a download link; ttl is the ttlSeconds input (nil
// for the default).
func (b *exportBundle) createDownload(t *testing.T, token, id string, ttl any) (string, time.Time) {
	t.Helper()
	in := map[string]any{"exportId": id}
	if ttl != nil {
		in["ttlSeconds"] = ttl
	}
	res := b.graphql(t, token, createDownloadMutation, map[string]any{"in": in})
	var data struct {
		CreateDataExportDownload struct {
			URL       string `json:"url"`
			ExpiresAt string `json:"expiresAt"`
		} `json:"createDataExportDownload"`
	}
	res.decode(t, &data)
	expires, err := time.Parse(time.RFC3339Nano, data.CreateDataExportDownload.ExpiresAt)
	require.NoError(t, err)
	// Without a public URL the link is relative to the service.
	require.True(t, strings.HasPrefix(data.CreateDataExportDownload.URL, "/api/v1/exports/download/"), data.CreateDataExportDownload.URL)
	return b.url + data.CreateDataExportDownload.URL, expires
}

// getURL GETs an absolute URL without credentials; header holds name,
// value pairs. The caller reads the body (closed at cleanup).
func getURL(t *testing.T, rawURL string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req, "")
}

// fetch GETs an absolute URL without credentials and reads the body.
func fetch(t *testing.T, rawURL string, header ...string) (*http.Response, []byte) {
	t.Helper()
	resp := getURL(t, rawURL, header...)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// exportAuditEvent is the part of an audit event the export tests look at.
type exportAuditEvent struct {
	Action  string `json:"action"`
	Subject struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"subject"`
	Resource struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"resource"`
	Governance *struct {
		Reason      *string `json:"reason"`
		Risk        string  `json:"risk"`
		ConfirmedBy *string `json:"confirmedBy"`
	} `json:"governance"`
	Details json.RawMessage `json:"details"`
}

// auditOf returns project A's audit events (the first 500) and the raw
// response.
func (b *exportBundle) auditOf(t *testing.T, token string) ([]exportAuditEvent, []byte) {
	t.Helper()
	res := b.graphql(t, token, listEventsQuery, map[string]any{"p": projectA, "first": 500})
	var data struct {
		AuditEvents struct {
			Edges []struct {
				Node exportAuditEvent `json:"node"`
			} `json:"edges"`
		} `json:"auditEvents"`
	}
	res.decode(t, &data)
	out := make([]exportAuditEvent, len(data.AuditEvents.Edges))
	for i, e := range data.AuditEvents.Edges {
		out[i] = e.Node
	}
	return out, res.Raw
}

// auditActions counts project A's audit events by action.
func (b *exportBundle) auditActions(t *testing.T, token string) map[string]int {
	t.Helper()
	events, _ := b.auditOf(t, token)
	out := map[string]int{}
	for _, e := range events {
		out[e.Action]++
	}
	return out
}

// auditWithAction returns project A's audit events of one action.
func (b *exportBundle) auditWithAction(t *testing.T, token, action string) []exportAuditEvent {
	t.Helper()
	events, _ := b.auditOf(t, token)
	var out []exportAuditEvent
	for _, e := range events {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// readyExport records three events in range and one outside, requests an
// export of them and runs it; it returns the READY export.
func (b *exportBundle) readyExport(t *testing.T, token string) dataExport {
	t.Helper()
	b.recordN(t, token, 3, "device.firmware.updated")
	outside := eventInput(projectA, "device.outside.range")
	outside["occurredAt"] = "2026-02-15T00:00:00Z"
	b.record(t, token, outside)
	e := b.requestExport(t, token, exportInput(nil))
	require.Equal(t, "QUEUED", e.State)
	b.runExport(t, tenantA, e.ID)
	got := b.getExport(t, token, e.ID)
	require.NotNil(t, got)
	require.Equal(t, "READY", got.State, "failure: %v", got.FailureReason)
	return *got
}

// tokenOfURL is the capability: a download URL's last path segment.
func tokenOfURL(t *testing.T, rawURL string) (prefix, token string) {
	t.Helper()
	i := strings.LastIndex(rawURL, "/")
	require.Positive(t, i)
	return rawURL[:i+1], rawURL[i+1:]
}

// flipAt replaces the character at i of s with another base64url one.
func flipAt(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// requireNo500 fails when the GraphQL answer is a server error.
func requireNo500(t *testing.T, res *gqlResult) {
	t.Helper()
	require.Less(t, res.Status, http.StatusInternalServerError, "%s", res.Raw)
	for _, e := range res.Errors {
		require.NotEqual(t, "INTERNAL", e.Extensions["code"], "%s", res.Raw)
	}
}

var sha256Digest = `^sha256:[0-9a-f]{64}$`

// TestExportGraphQLLifecycle: a confirmed request queues an export and
// audits it; run, it is READY with a digest and length that match the bytes
// its download link (no other credential) serves, Range included.
func TestExportGraphQLLifecycle(t *testing.T) {
	t.Parallel()
	b := setupExports(t, nil)
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	start := time.Now()
	b.recordN(t, tok, 3, "device.firmware.updated")
	outside := eventInput(projectA, "device.outside.range")
	outside["occurredAt"] = "2026-02-15T00:00:00Z"
	b.record(t, tok, outside)

	// Without confirm: refused, and nothing was created or audited.
	res := b.graphql(t, tok, requestExportMutation, map[string]any{"in": exportInput(map[string]any{"confirm": false})})
	require.Equal(t, "CONFIRMATION_REQUIRED", res.code(t), "%s", res.Raw)
	require.Equal(t, "confirm", res.Errors[0].Extensions["field"])
	require.Equal(t, "null", string(res.Data))
	require.Empty(t, b.listExports(t, tok, projectA))
	require.Empty(t, b.auditWithAction(t, tok, "export.requested"))

	// Confirmed: QUEUED, nothing of an object yet.
	queued := b.requestExport(t, tok, exportInput(nil))
	require.NotEmpty(t, queued.ID)
	require.Equal(t, projectA, queued.ProjectID)
	require.Equal(t, "AUDIT", queued.Kind)
	require.Equal(t, "NDJSON", queued.Format)
	require.Equal(t, "NONE", queued.Compression)
	require.Equal(t, exportFrom, queued.From)
	require.Equal(t, exportTo, queued.To)
	require.Equal(t, "QUEUED", queued.State)
	require.Equal(t, "0", queued.ProgressRows)
	require.Equal(t, "0", queued.ProgressBytes)
	for name, v := range map[string]*string{
		"startedAt": queued.StartedAt, "objectRef": queued.ObjectRef, "contentDigest": queued.ContentDigest,
		"byteLength": queued.ByteLength, "rowCount": queued.RowCount, "readyAt": queued.ReadyAt,
		"expiresAt": queued.ExpiresAt, "failedAt": queued.FailedAt, "expiredAt": queued.ExpiredAt,
	} {
		require.Nil(t, v, name)
	}
	requested, err := time.Parse(time.RFC3339Nano, queued.RequestedAt)
	require.NoError(t, err)
	require.WithinRange(t, requested, start.Add(-time.Minute), time.Now().Add(time.Minute))
	require.Equal(t, []dataExport{queued}, b.listExports(t, tok, projectA))

	// Audited as export.requested, high risk, with the confirmation.
	audits := b.auditWithAction(t, tok, "export.requested")
	require.Len(t, audits, 1)
	ev := audits[0]
	require.NotNil(t, ev.Governance)
	require.Equal(t, "HIGH", ev.Governance.Risk)
	require.NotNil(t, ev.Governance.ConfirmedBy)
	require.Equal(t, "tester", *ev.Governance.ConfirmedBy)
	require.Equal(t, "tester", ev.Subject.ID)
	require.Equal(t, "data_export", ev.Resource.Type)
	require.Equal(t, queued.ID, ev.Resource.ID)

	// Run: READY.
	b.runExport(t, tenantA, queued.ID)
	got := b.getExport(t, tok, queued.ID)
	require.NotNil(t, got)
	ready := *got
	require.Equal(t, "READY", ready.State, "failure: %v", ready.FailureReason)
	require.NotNil(t, ready.ObjectRef)
	require.Contains(t, *ready.ObjectRef, queued.ID)
	require.NotNil(t, ready.ContentDigest)
	require.Regexp(t, sha256Digest, *ready.ContentDigest)
	require.NotNil(t, ready.ByteLength)
	require.Regexp(t, `^[1-9][0-9]*$`, *ready.ByteLength)
	require.NotNil(t, ready.RowCount)
	require.Equal(t, "3", *ready.RowCount, "the three events in range, not the one outside")
	require.Equal(t, "3", ready.ProgressRows)
	require.Equal(t, *ready.ByteLength, ready.ProgressBytes)
	require.NotNil(t, ready.StartedAt)
	require.NotNil(t, ready.ReadyAt)
	require.NotNil(t, ready.ExpiresAt)
	require.Nil(t, ready.FailedAt)
	require.Nil(t, ready.ExpiredAt)
	readyAt, err := time.Parse(time.RFC3339Nano, *ready.ReadyAt)
	require.NoError(t, err)
	expiresAt, err := time.Parse(time.RFC3339Nano, *ready.ExpiresAt)
	require.NoError(t, err)
	require.Equal(t, app.DefaultExportTTL, expiresAt.Sub(readyAt))

	// A download link (relative to this server: no public URL is set), with
	// a 10-minute default life.
	dlURL, dlExpires := b.createDownload(t, tok, ready.ID, nil)
	u, err := url.Parse(dlURL)
	require.NoError(t, err)
	require.True(t, u.IsAbs(), dlURL)
	require.Equal(t, "http", u.Scheme)
	require.True(t, strings.HasPrefix(dlURL, b.url+"/api/v1/exports/download/"), dlURL)
	require.WithinRange(t, dlExpires, start.Add(app.DefaultDownloadTTL-time.Minute), time.Now().Add(app.DefaultDownloadTTL+time.Minute))

	// The download needs no Authorization; its bytes are what READY says.
	resp, body := fetch(t, dlURL)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	sum := sha256.Sum256(body)
	require.Equal(t, *ready.ContentDigest, "sha256:"+hex.EncodeToString(sum[:]))
	require.Equal(t, *ready.ByteLength, strconv.Itoa(len(body)))
	require.Equal(t, *ready.ByteLength, resp.Header.Get("Content-Length"))
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	require.Equal(t, `attachment; filename="export-`+ready.ID+`.ndjson"`, resp.Header.Get("Content-Disposition"))
	require.Equal(t, "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":", resp.Header.Get("Repr-Digest"))
	require.Equal(t, "SHA-256="+base64.StdEncoding.EncodeToString(sum[:]), resp.Header.Get("Digest"))
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	require.Len(t, lines, 3, "%s", body)
	for _, line := range lines {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row), line)
		require.Equal(t, "device.firmware.updated", row["action"])
		require.Equal(t, tenantA, row["tenantId"])
		require.Equal(t, projectA, row["projectId"])
	}

	// Range: the first ten bytes.
	resp, part := fetch(t, dlURL, "Range", "bytes=0-9")
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", part)
	require.Equal(t, body[:10], part)
	require.Equal(t, "bytes 0-9/"+*ready.ByteLength, resp.Header.Get("Content-Range"))
	require.Equal(t, "10", resp.Header.Get("Content-Length"))

	// And a range in the middle.
	resp, part = fetch(t, dlURL, "Range", "bytes=5-14")
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", part)
	require.Equal(t, body[5:15], part)

	// A range past the end is not satisfiable.
	resp, part = fetch(t, dlURL, "Range", "bytes="+strconv.Itoa(len(body)+10)+"-")
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, "%s", part)
	require.Equal(t, "bytes */"+*ready.ByteLength, resp.Header.Get("Content-Range"))

	// 100 overlapping ranges are one read: a single part.
	var overlapping []string
	for i := range 100 {
		overlapping = append(overlapping, strconv.Itoa(i%10)+"-"+strconv.Itoa(10+i%7))
	}
	resp, part = fetch(t, dlURL, "Range", "bytes="+strings.Join(overlapping, ","))
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", part)
	require.Equal(t, "bytes 0-16/"+*ready.ByteLength, resp.Header.Get("Content-Range"))
	require.Equal(t, body[:17], part)

	// 100 distinct ranges are refused: each would be a read of its own.
	var distinct []string
	for i := range 100 {
		distinct = append(distinct, strconv.Itoa(3*i)+"-"+strconv.Itoa(3*i))
	}
	resp, part = fetch(t, dlURL, "Range", "bytes="+strings.Join(distinct, ","))
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, "%s", part)
	require.Equal(t, "bytes */"+*ready.ByteLength, resp.Header.Get("Content-Range"))

	// Eight ranges are served, as a multipart response.
	resp, part = fetch(t, dlURL, "Range", "bytes="+strings.Join(distinct[:8], ","))
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", part)
	require.Contains(t, resp.Header.Get("Content-Type"), "multipart/byteranges")

	// Audited as export.download_created, without the capability.
	_, token := tokenOfURL(t, dlURL)
	dl := b.auditWithAction(t, tok, "export.download_created")
	require.Len(t, dl, 1)
	require.Equal(t, "data_export", dl[0].Resource.Type)
	require.Equal(t, ready.ID, dl[0].Resource.ID)
	_, raw := b.auditOf(t, tok)
	require.NotContains(t, string(raw), token, "the audit trail holds the capability")
}

// TestExportDownloadCapability: a tampered, forged or expired capability is
// 403; an expired export's link is 410; download lifetimes are bounded; only
// a READY export can be downloaded; expiring needs confirm.
func TestExportDownloadCapability(t *testing.T) {
	t.Parallel()
	b := setupExports(t, nil)
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	ready := b.readyExport(t, tok)
	dlURL, _ := b.createDownload(t, tok, ready.ID, nil)
	prefix, token := tokenOfURL(t, dlURL)
	resp, body := fetch(t, dlURL)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	t.Run("Tampered", func(t *testing.T) {
		dot := strings.Index(token, ".")
		require.Positive(t, dot)
		for _, i := range []int{0, 3, dot / 2, dot - 2, dot + 1, dot + 10, len(token) - 2} {
			bad := flipAt(token, i)
			require.NotEqual(t, token, bad)
			p := requireProblem(t, getURL(t, prefix+bad), http.StatusForbidden, "FORBIDDEN")
			require.NotEmpty(t, p.Detail)
		}
		for _, bad := range []string{"x", "a.b", token[:dot], token + "A", strings.Replace(token, ".", "", 1), token[:dot] + "."} {
			requireProblem(t, getURL(t, prefix+url.PathEscape(bad)), http.StatusForbidden, "FORBIDDEN")
		}
	})

	t.Run("Forged", func(t *testing.T) {
		id := uuid.MustParse(ready.ID)
		future := time.Now().Add(time.Hour)
		// Another key.
		other := export.SignDownload([]byte("another-key-another-key-another-key-0123"), id, tenantA, future)
		requireProblem(t, getURL(t, prefix+other), http.StatusForbidden, "FORBIDDEN")
		// The right key, but the export under another tenant, or an
		// export that does not exist: still 403, no 200, no 500.
		requireProblem(t, getURL(t, prefix+export.SignDownload(exportDownloadKey, id, tenantB, future)), http.StatusForbidden, "FORBIDDEN")
		requireProblem(t, getURL(t, prefix+export.SignDownload(exportDownloadKey, uuid.New(), tenantA, future)), http.StatusForbidden, "FORBIDDEN")
		// The right key, past its expiry.
		requireProblem(t, getURL(t, prefix+export.SignDownload(exportDownloadKey, id, tenantA, time.Now().Add(-time.Second))),
			http.StatusForbidden, "FORBIDDEN")
	})

	t.Run("ShortLived", func(t *testing.T) {
		before := time.Now()
		short, expires := b.createDownload(t, tok, ready.ID, 1)
		// Whole seconds, rounded up: the link lasts at least its lifetime.
		require.WithinRange(t, expires, before.Add(time.Second), time.Now().Add(2*time.Second))
		require.Eventually(t, func() bool {
			resp, _ := fetch(t, short)
			return resp.StatusCode == http.StatusForbidden
		}, 10*time.Second, 100*time.Millisecond)
		require.False(t, time.Now().Before(expires), "refused before its expiry")
		requireProblem(t, getURL(t, short), http.StatusForbidden, "FORBIDDEN")
	})

	t.Run("TTLBounds", func(t *testing.T) {
		for _, ttl := range []int{0, -1, 3601} {
			res := b.graphql(t, tok, createDownloadMutation, map[string]any{"in": map[string]any{"exportId": ready.ID, "ttlSeconds": ttl}})
			require.Equal(t, "BAD_USER_INPUT", res.code(t), "ttl %d: %s", ttl, res.Raw)
			require.Equal(t, "ttlSeconds", res.Errors[0].Extensions["field"])
		}
		before := time.Now()
		_, expires := b.createDownload(t, tok, ready.ID, 3600)
		require.WithinRange(t, expires, before.Add(time.Hour), time.Now().Add(time.Hour+time.Second))
	})

	t.Run("NotReady", func(t *testing.T) {
		queued := b.requestExport(t, tok, exportInput(map[string]any{"format": "CSV"}))
		res := b.graphql(t, tok, createDownloadMutation, map[string]any{"in": map[string]any{"exportId": queued.ID}})
		require.Equal(t, "INVALID_STATE", res.code(t), "%s", res.Raw)
		require.Equal(t, "null", string(res.Data))
		expired := b.expireExport(t, tok, queued.ID)
		require.Equal(t, "EXPIRED", expired.State, "a QUEUED export can expire")
	})

	// Expiring needs confirm; unconfirmed, the export stays READY.
	res := b.graphql(t, tok, expireExportMutation, map[string]any{"in": map[string]any{"exportId": ready.ID, "confirm": false}})
	require.Equal(t, "CONFIRMATION_REQUIRED", res.code(t), "%s", res.Raw)
	require.Equal(t, "READY", b.getExport(t, tok, ready.ID).State)
	resp, _ = fetch(t, dlURL)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	expired := b.expireExport(t, tok, ready.ID)
	require.Equal(t, "EXPIRED", expired.State)
	require.NotNil(t, expired.ExpiredAt)
	require.Equal(t, "EXPIRED", b.getExport(t, tok, ready.ID).State)

	// The link, still within its life, now answers 410.
	requireProblem(t, getURL(t, dlURL), http.StatusGone, "INVALID_STATE")
	requireProblem(t, getURL(t, dlURL, "Range", "bytes=0-9"), http.StatusGone, "INVALID_STATE")

	// An expired export can neither be downloaded nor expired again.
	res = b.graphql(t, tok, createDownloadMutation, map[string]any{"in": map[string]any{"exportId": ready.ID}})
	require.Equal(t, "INVALID_STATE", res.code(t), "%s", res.Raw)
	res = b.graphql(t, tok, expireExportMutation, map[string]any{"in": map[string]any{"exportId": ready.ID, "confirm": true}})
	require.Equal(t, "INVALID_STATE", res.code(t), "%s", res.Raw)

	require.Equal(t, 2, b.auditActions(t, tok)["export.expired"], "the two expiries, once each")
}

// alarmEntry is a valid AlarmHistoryEntryInput; id may be empty.
func alarmEntry(id, alarmID string) map[string]any {
	e := map[string]any{
		"occurredAt": "2026-01-03T10:00:00Z", "alarmId": alarmID, "deviceId": "dev-1",
		"severity": "MAJOR", "state": "RAISED", "message": "overheating", "details": map[string]any{"celsius": 91},
	}
	if id != "" {
		e["id"] = id
	}
	return e
}

// telemetryPoint is a valid TelemetryPointInput.
func telemetryPoint(metric string) map[string]any {
	return map[string]any{"deviceId": "dev-1", "metric": metric, "occurredAt": "2026-01-03T10:00:00Z", "value": 21.5, "unit": "C"}
}

func (b *exportBundle) appendHistory(t *testing.T, token, mutation, list string, items ...map[string]any) *gqlResult {
	t.Helper()
	return b.graphql(t, token, mutation, map[string]any{"in": map[string]any{"projectId": projectA, list: items}})
}

func appended(t *testing.T, res *gqlResult) int {
	t.Helper()
	var data map[string]struct {
		Appended int `json:"appended"`
	}
	res.decode(t, &data)
	require.Len(t, data, 1)
	for _, v := range data {
		return v.Appended
	}
	return -1
}

// TestExportBadInput: bad ranges, the quota of active exports and the
// history appends' validation, none of them a server error.
func TestExportBadInput(t *testing.T) {
	t.Parallel()
	b := setupExports(t, func(c *app.ExportConfig) { c.MaxActive = 1 })
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	b.recordN(t, tok, 2, "device.firmware.updated")

	t.Run("Requests", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			extra map[string]any
			field string
		}{
			{"ToEqualsFrom", map[string]any{"to": exportFrom}, "to"},
			{"ToBeforeFrom", map[string]any{"from": exportTo, "to": exportFrom}, "to"},
			{"RangeOver31Days", map[string]any{"to": "2026-02-01T00:00:01Z"}, "to"},
			{"RangeOfAYear", map[string]any{"to": "2027-01-01T00:00:00Z"}, "to"},
			{"IdempotencyKeyTooLong", map[string]any{"idempotencyKey": strings.Repeat("k", app.MaxIdempotencyKeyLength+1)}, "idempotencyKey"},
			{"UnknownKind", map[string]any{"kind": "EVERYTHING"}, ""},
			{"MalformedFrom", map[string]any{"from": "yesterday"}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := b.graphql(t, tok, requestExportMutation, map[string]any{"in": exportInput(tc.extra)})
				requireNo500(t, res)
				require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
				if tc.field != "" {
					require.Equal(t, tc.field, res.Errors[0].Extensions["field"], "%s", res.Raw)
				}
			})
		}
		require.Empty(t, b.listExports(t, tok, projectA), "a refused request creates nothing")
		require.Empty(t, b.auditWithAction(t, tok, "export.requested"))
	})

	t.Run("Quota", func(t *testing.T) {
		// Exactly 31 days is allowed.
		keyed := map[string]any{"to": "2026-02-01T00:00:00Z", "idempotencyKey": "export-key-1"}
		first := b.requestExport(t, tok, exportInput(keyed))
		require.Equal(t, "QUEUED", first.State)

		// A repeat of the keyed request is the first export, not a second
		// one (so not over the quota either); the key with another request
		// is a conflict.
		require.Equal(t, first, b.requestExport(t, tok, exportInput(keyed)))
		res := b.graphql(t, tok, requestExportMutation, map[string]any{"in": exportInput(map[string]any{
			"to": "2026-02-01T00:00:00Z", "idempotencyKey": "export-key-1", "format": "CSV",
		})})
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t), "%s", res.Raw)

		res = b.graphql(t, tok, requestExportMutation, map[string]any{"in": exportInput(nil)})
		requireNo500(t, res)
		require.Equal(t, "QUOTA_EXCEEDED", res.code(t), "%s", res.Raw)
		require.Equal(t, "null", string(res.Data))
		require.Equal(t, []dataExport{first}, b.listExports(t, tok, projectA))
		require.Len(t, b.auditWithAction(t, tok, "export.requested"), 1)

		// The quota is the tenant's: another project counts too.
		all := b.token(t, tokenOpts{perms: allExportPerms, projects: []string{app.AllProjects}})
		res = b.graphql(t, all, requestExportMutation, map[string]any{"in": exportInput(map[string]any{"projectId": projectB})})
		require.Equal(t, "QUOTA_EXCEEDED", res.code(t), "%s", res.Raw)

		// Once the first is READY, another may be queued.
		b.runExport(t, tenantA, first.ID)
		require.Equal(t, "READY", b.getExport(t, tok, first.ID).State)
		second := b.requestExport(t, tok, exportInput(nil))
		require.Equal(t, "QUEUED", second.State)
		// Expiring a QUEUED export frees its place too.
		b.expireExport(t, tok, second.ID)
	})

	t.Run("History", func(t *testing.T) {
		ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
		entries := []map[string]any{alarmEntry(ids[0], "alarm-1"), alarmEntry(ids[1], "alarm-2"), alarmEntry(ids[2], "alarm-1")}
		require.Equal(t, 3, appended(t, b.appendHistory(t, tok, appendAlarmsMutation, "entries", entries...)))
		require.Equal(t, 0, appended(t, b.appendHistory(t, tok, appendAlarmsMutation, "entries", entries...)), "a retry appends nothing")
		// A batch of a known and a new entry appends the new one.
		require.Equal(t, 1, appended(t, b.appendHistory(t, tok, appendAlarmsMutation, "entries",
			alarmEntry(ids[0], "alarm-1"), alarmEntry("", "alarm-3"))))

		points := []map[string]any{telemetryPoint("temperature"), telemetryPoint("humidity")}
		require.Equal(t, 2, appended(t, b.appendHistory(t, tok, appendTelemetryMutation, "points", points...)))
		require.Equal(t, 0, appended(t, b.appendHistory(t, tok, appendTelemetryMutation, "points", points...)), "a retry appends nothing")

		// The appended history is what ALARM and TELEMETRY exports hold.
		for kind, rows := range map[string][]string{"ALARM": make([]string, 4), "TELEMETRY": make([]string, 2)} {
			e := b.requestExport(t, tok, exportInput(map[string]any{"kind": kind, "format": "CSV", "compression": "GZIP"}))
			b.runExport(t, tenantA, e.ID)
			got := b.getExport(t, tok, e.ID)
			require.Equal(t, "READY", got.State, "%s: %v", kind, got.FailureReason)
			require.NotNil(t, got.RowCount)
			require.Equal(t, strconv.Itoa(len(rows)), *got.RowCount, kind)
			dlURL, _ := b.createDownload(t, tok, e.ID, nil)
			resp, body := fetch(t, dlURL)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "application/gzip", resp.Header.Get("Content-Type"))
			sum := sha256.Sum256(body)
			require.Equal(t, *got.ContentDigest, "sha256:"+hex.EncodeToString(sum[:]))
			require.Equal(t, `attachment; filename="export-`+e.ID+`.csv.gz"`, resp.Header.Get("Content-Disposition"))
			zr, err := gzip.NewReader(bytes.NewReader(body))
			require.NoError(t, err, kind)
			records, err := csv.NewReader(zr).ReadAll()
			require.NoError(t, err, kind)
			require.Len(t, records, len(rows)+1, "%s: a header row and the rows", kind)
		}
	})

	t.Run("BadAlarms", func(t *testing.T) {
		with := func(f func(map[string]any)) map[string]any {
			e := alarmEntry(uuid.NewString(), "alarm-bad")
			f(e)
			return e
		}
		for _, tc := range []struct {
			name    string
			entries []map[string]any
			field   string
		}{
			{"NoEntries", []map[string]any{}, "entries"},
			{"EmptyAlarmID", []map[string]any{with(func(e map[string]any) { e["alarmId"] = "" })}, "entries[0].alarmId"},
			{"AlarmIDTooLong", []map[string]any{with(func(e map[string]any) { e["alarmId"] = strings.Repeat("a", 257) })}, "entries[0].alarmId"},
			{"EmptyDeviceID", []map[string]any{with(func(e map[string]any) { e["deviceId"] = "" })}, "entries[0].deviceId"},
			{"MessageTooLong", []map[string]any{with(func(e map[string]any) { e["message"] = strings.Repeat("m", 1025) })}, "entries[0].message"},
			{"DetailsArray", []map[string]any{with(func(e map[string]any) { e["details"] = []any{1, 2} })}, ""},
			{"BadID", []map[string]any{with(func(e map[string]any) { e["id"] = "nope" })}, "entries[0].id"},
			{"FarFuture", []map[string]any{with(func(e map[string]any) {
				e["occurredAt"] = time.Now().Add(72 * time.Hour).UTC().Format(time.RFC3339)
			})}, "entries[0].occurredAt"},
			{"SeverityMissing", []map[string]any{with(func(e map[string]any) { delete(e, "severity") })}, ""},
			{"UnknownSeverity", []map[string]any{with(func(e map[string]any) { e["severity"] = "LOUD" })}, ""},
			{"SecondBad", []map[string]any{alarmEntry(uuid.NewString(), "alarm-good"), with(func(e map[string]any) { e["alarmId"] = "" })}, "entries[1].alarmId"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := b.appendHistory(t, tok, appendAlarmsMutation, "entries", tc.entries...)
				requireNo500(t, res)
				require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
				if tc.field != "" {
					require.Equal(t, tc.field, res.Errors[0].Extensions["field"], "%s", res.Raw)
				}
			})
		}
	})

	t.Run("BadTelemetry", func(t *testing.T) {
		with := func(f func(map[string]any)) map[string]any {
			p := telemetryPoint("pressure")
			f(p)
			return p
		}
		for _, tc := range []struct {
			name   string
			points []map[string]any
			field  string
		}{
			{"NoPoints", []map[string]any{}, "points"},
			{"UnitTooLong", []map[string]any{with(func(p map[string]any) { p["unit"] = strings.Repeat("u", 33) })}, "points[0].unit"},
			{"EmptyMetric", []map[string]any{with(func(p map[string]any) { p["metric"] = "" })}, "points[0].metric"},
			{"EmptyDeviceID", []map[string]any{with(func(p map[string]any) { p["deviceId"] = "" })}, "points[0].deviceId"},
			{"OccurredAtBefore1970", []map[string]any{with(func(p map[string]any) { p["occurredAt"] = "1969-12-31T23:59:59Z" })}, "points[0].occurredAt"},
			{"ValueNotANumber", []map[string]any{with(func(p map[string]any) { p["value"] = "hot" })}, ""},
			{"ValueMissing", []map[string]any{with(func(p map[string]any) { delete(p, "value") })}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := b.appendHistory(t, tok, appendTelemetryMutation, "points", tc.points...)
				requireNo500(t, res)
				require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
				if tc.field != "" {
					require.Equal(t, tc.field, res.Errors[0].Extensions["field"], "%s", res.Raw)
				}
			})
		}
	})

	t.Run("NothingOfTheRefusedWasStored", func(t *testing.T) {
		// A retry of the valid entry of the refused batch is new.
		require.Equal(t, 1, appended(t, b.appendHistory(t, tok, appendAlarmsMutation, "entries", alarmEntry(uuid.NewString(), "alarm-good"))))
		require.Equal(t, 1, appended(t, b.appendHistory(t, tok, appendTelemetryMutation, "points", telemetryPoint("pressure"))))
	})

	t.Run("WithoutHistoryWrite", func(t *testing.T) {
		noWrite := b.token(t, tokenOpts{perms: exportPermsWithout(app.PermissionHistoryWrite)})
		for mutation, list := range map[string]string{appendAlarmsMutation: "entries", appendTelemetryMutation: "points"} {
			item := alarmEntry(uuid.NewString(), "alarm-x")
			if list == "points" {
				item = telemetryPoint("voltage")
			}
			res := b.appendHistory(t, noWrite, mutation, list, item)
			requireNo500(t, res)
			require.Equal(t, "FORBIDDEN", res.code(t), "%s", res.Raw)
			require.Contains(t, res.Errors[0].Message, string(app.PermissionHistoryWrite))
		}
	})
}

// wsExportSubscribe subscribes operation opID to dataExportUpdated of
// exportID.
func wsExportSubscribe(c *wsClient, opID, exportID string) {
	c.t.Helper()
	c.send(map[string]any{"id": opID, "type": "subscribe", "payload": map[string]any{
		"query": exportUpdatedSubscription, "variables": map[string]any{"id": exportID},
	}})
}

// wsExportNext reads the next value of operation opID.
func wsExportNext(c *wsClient, opID string) dataExport {
	c.t.Helper()
	msg := c.read()
	require.Equal(c.t, "next", msg["type"], "%v", msg)
	require.Equal(c.t, opID, msg["id"])
	var p struct {
		Data struct {
			DataExportUpdated dataExport `json:"dataExportUpdated"`
		} `json:"data"`
		Errors []gqlError `json:"errors"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(mustJSON(c.t, msg["payload"])), &p))
	require.Empty(c.t, p.Errors, "%v", msg)
	return p.Data.DataExportUpdated
}

// TestExportUpdatedSubscription: dataExportUpdated yields QUEUED, then
// (RUNNING and) READY after the run, then EXPIRED, and completes.
func TestExportUpdatedSubscription(t *testing.T) {
	t.Parallel()
	b := setupExports(t, nil)
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	b.recordN(t, tok, 3, "device.firmware.updated")
	queued := b.requestExport(t, tok, exportInput(nil))

	c := b.dialWS(t, tok)
	wsExportSubscribe(c, "u", queued.ID)
	require.Equal(t, queued, wsExportNext(c, "u"), "the current state first")

	b.runExport(t, tenantA, queued.ID)
	var states []string
	var ready dataExport
	for {
		e := wsExportNext(c, "u")
		require.Equal(t, queued.ID, e.ID)
		states = append(states, e.State)
		if e.State == "READY" {
			ready = e
			break
		}
		require.Equal(t, "RUNNING", e.State, "states so far: %v", states)
		require.Less(t, len(states), 100, "no READY: %v", states)
	}
	require.NotNil(t, ready.ContentDigest)
	require.Regexp(t, sha256Digest, *ready.ContentDigest)
	require.NotNil(t, ready.RowCount)
	require.Equal(t, "3", *ready.RowCount)
	require.Equal(t, ready, *b.getExport(t, tok, queued.ID), "the update is the stored export")

	expired := b.expireExport(t, tok, queued.ID)
	got := wsExportNext(c, "u")
	require.Equal(t, "EXPIRED", got.State)
	require.Equal(t, expired, got)
	done := c.read()
	require.Equal(t, "complete", done["type"], "%v", done)
	require.Equal(t, "u", done["id"])

	// A subscription to an expired export gets EXPIRED and completes.
	wsExportSubscribe(c, "late", queued.ID)
	require.Equal(t, "EXPIRED", wsExportNext(c, "late").State)
	done = c.read()
	require.Equal(t, "complete", done["type"], "%v", done)
	require.Equal(t, "late", done["id"])

	// The connection stays usable.
	c.send(map[string]any{"type": "ping"})
	require.Equal(t, "pong", c.read()["type"])
}
