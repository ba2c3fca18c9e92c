package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/metrics"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/server/openapi"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// openAPIUndocumented are the ServeMux patterns the OpenAPI document leaves
// out, with the reason; every other route must be in it, and everything in
// it must be a route.
var openAPIUndocumented = map[string]string{
	"/":                        "the catch-all 404 (described in info.description)",
	"/graphql":                 "GraphQL: its contract is the GraphQL schema (schema/*.graphqls, docs/api-reference.md)",
	"GET /dashboard":           "the dashboard's HTML page",
	"GET /dashboard/{$}":       "the dashboard's HTML page",
	"GET /dashboard/{file...}": "the dashboard's static files",
	"GET /graphiql":            "the GraphiQL IDE's HTML page",
	"GET /graphiql/{$}":        "the GraphiQL IDE's HTML page",
	"GET /graphiql/{file...}":  "the GraphiQL IDE's static files",
	"GET /riverui/sign-in":     "River UI: an operator's HTML sign-in form",
	"POST /riverui/sign-in":    "River UI: an operator's HTML sign-in form",
	"POST /riverui/sign-out":   "River UI: an operator's HTML sign-out",
	"/riverui/":                "River UI: a third-party operator UI and its private API",
}

// TestOpenAPIRoutesMatchDocument: every route the server registers is in the
// OpenAPI document or in openAPIUndocumented, and every operation of the
// document is a route the server registers (a GET route serves HEAD too).
func TestOpenAPIRoutesMatchDocument(t *testing.T) {
	t.Parallel()
	doc := newOpenAPIChecker(t)
	documented := map[string]bool{}
	for path, item := range doc.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			method = strings.ToUpper(method)
			if method == http.MethodHead {
				method = http.MethodGet
			}
			documented[method+" "+path] = true
		}
	}
	routes := isoServerRoutes(t)
	for _, route := range routes {
		_, skipped := openAPIUndocumented[route]
		switch {
		case skipped:
			require.False(t, documented[route], "%s is documented and listed in openAPIUndocumented", route)
		default:
			require.True(t, documented[route], "route %s is not in server/openapi/openapi.json (describe it, or list it in openAPIUndocumented)", route)
		}
	}
	for route := range documented {
		require.Contains(t, routes, route, "the OpenAPI document describes %s, which the server does not register", route)
	}
	for route := range openAPIUndocumented {
		require.Contains(t, routes, route, "openAPIUndocumented lists %s, which the server does not register", route)
	}
}

// openAPIChecker validates real exchanges against the OpenAPI document
// (server/openapi/openapi.json) with libopenapi-validator, and records which
// documented responses they produced.
type openAPIChecker struct {
	model *v3.Document
	v     validator.Validator
	opts  *config.ValidationOptions
	// sseData maps an SSE event type to the schema of its data, as the
	// stream's x-aether-sse-events extension says.
	sseData map[string]*base.Schema
	schemas schema_validation.SchemaValidator

	mu       sync.Mutex
	seen     map[string]bool // "METHOD /path/template status"
	sseTypes map[string]int  // SSE events validated, by type
}

// newOpenAPIChecker parses the embedded document and builds its validator:
// format assertions on (date-time, uuid, uri), and text/event-stream bodies
// decoded frame by frame, each frame's data validated against the schema its
// event type names.
func newOpenAPIChecker(t *testing.T) *openAPIChecker {
	t.Helper()
	doc, err := libopenapi.NewDocument(openapi.Document)
	require.NoError(t, err)
	built, err := doc.BuildV3Model()
	require.NoError(t, err)
	c := &openAPIChecker{
		model:    &built.Model,
		sseData:  map[string]*base.Schema{},
		schemas:  schema_validation.NewSchemaValidator(config.WithFormatAssertions()),
		seen:     map[string]bool{},
		sseTypes: map[string]int{},
	}
	stream := c.model.Paths.PathItems.GetOrZero("/api/v1/audit/events/stream")
	require.NotNil(t, stream)
	media := stream.Get.Responses.Codes.GetOrZero("200").Content.GetOrZero("text/event-stream")
	require.NotNil(t, media)
	ext := media.Extensions.GetOrZero("x-aether-sse-events")
	require.NotNil(t, ext, "the stream's media type maps event types to schemas")
	var refs map[string]string
	require.NoError(t, ext.Decode(&refs))
	for event, ref := range refs {
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		require.True(t, ok, ref)
		proxy := c.model.Components.Schemas.GetOrZero(name)
		require.NotNil(t, proxy, ref)
		c.sseData[event] = proxy.Schema()
	}
	opts := []config.Option{
		config.WithFormatAssertions(),
		config.WithBodyDecoder("text/event-stream", content.DecoderFunc(c.decodeSSE)),
		// NDJSON is no single JSON value: one object per line.
		config.WithBodyDecoder("application/x-ndjson", content.DecoderFunc(decodeNDJSON)),
	}
	c.opts = config.NewValidationOptions(opts...)
	v, errs := validator.NewValidator(doc, opts...)
	require.Empty(t, errs)
	ok, docErrs := v.ValidateDocument()
	require.True(t, ok, "the document is not valid OpenAPI: %v", docErrs)
	c.v = v
	return c
}

// decodeSSE reads a text/event-stream body: every line is a field (id,
// event, data, retry) or a comment, frames end with a blank line, the body
// ends after one, and each frame's data is validated against the schema of
// its event type. The body is the value then validated against the media
// type's schema (a string).
func (c *openAPIChecker) decodeSSE(in *content.DecodeInput) (any, error) {
	raw, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 && !bytes.HasSuffix(raw, []byte("\n\n")) {
		return nil, errors.New("the stream ends inside a frame")
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	var event, data string
	fields := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != "" || event != "" {
				if err := c.checkSSEData(event, data); err != nil {
					return nil, err
				}
			}
			event, data, fields = "", "", 0
			continue
		}
		fields++
		name, value, _ := strings.Cut(line, ": ")
		switch name {
		case "":
			// a comment (": heartbeat")
		case "id":
			if strings.Trim(value, "0123456789") != "" {
				return nil, fmt.Errorf("id %q is not a sequence", value)
			}
		case "event":
			event = value
		case "data":
			data = value
		case "retry":
			if value == "" || strings.Trim(value, "0123456789") != "" {
				return nil, fmt.Errorf("retry %q is not a number of milliseconds", value)
			}
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	if fields != 0 {
		return nil, errors.New("the stream ends inside a frame")
	}
	return string(raw), sc.Err()
}

// decodeNDJSON reads an NDJSON body: every line a JSON object, unless it is
// a byte range of one. The body is the value then validated against the
// media type's schema (a string).
func decodeNDJSON(in *content.DecodeInput) (any, error) {
	raw, err := io.ReadAll(in.Body)
	if err != nil || in.Header.Get("Content-Range") != "" {
		return string(raw), err
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			return nil, fmt.Errorf("line %d is not a JSON object: %w", i+1, err)
		}
	}
	return string(raw), nil
}

// requireSchema validates a JSON value against a schema of the document's
// components.
func (c *openAPIChecker) requireSchema(t *testing.T, name, value string) {
	t.Helper()
	proxy := c.model.Components.Schemas.GetOrZero(name)
	require.NotNil(t, proxy, name)
	ok, errs := c.schemas.ValidateSchemaStringWithVersion(proxy.Schema(), value, 3.1)
	require.True(t, ok, "%s is not a %s:%s", value, name, describeOpenAPIErrors(errs))
}

// checkSSEData validates one frame's data against its event type's schema.
func (c *openAPIChecker) checkSSEData(event, data string) error {
	schema, ok := c.sseData[event]
	if !ok {
		return fmt.Errorf("event type %q is not in x-aether-sse-events", event)
	}
	if ok, errs := c.schemas.ValidateSchemaStringWithVersion(schema, data, 3.1); !ok {
		return fmt.Errorf("%s data %s: %s", event, data, describeOpenAPIErrors(errs))
	}
	c.mu.Lock()
	c.sseTypes[event]++
	c.mu.Unlock()
	return nil
}

// describeOpenAPIErrors renders validation errors with their schema
// failures.
func describeOpenAPIErrors(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n- %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s (%s): %s", f.FieldPath, f.KeywordLocation, f.Reason)
		}
	}
	return b.String()
}

// openAPICall is one real request and what it must get.
type openAPICall struct {
	name   string
	method string // default GET
	url    string // absolute
	token  string
	header []string // name, value pairs
	status int
	code   string // the problem's code, for an error answer
	// docRejects: the document itself tells this request is invalid (its
	// parameters break the declared schemas), so a 400 was predictable.
	docRejects bool
}

// call sends the request, reads the whole answer and validates it: the
// response (status, declared headers, media type, body) always, the request
// too when the server accepted it.
func (c *openAPIChecker) call(t *testing.T, oc openAPICall) (*http.Response, []byte) {
	t.Helper()
	return c.finish(t, oc, c.send(t, oc))
}

// send sends the request and returns once the answer's headers are in.
func (c *openAPIChecker) send(t *testing.T, oc openAPICall) *http.Response {
	t.Helper()
	method := oc.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, oc.url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(oc.header); i += 2 {
		req.Header.Set(oc.header[i], oc.header[i+1])
	}
	return do(t, req, oc.token)
}

// finish reads the whole answer to a request of send and validates it.
func (c *openAPIChecker) finish(t *testing.T, oc openAPICall, resp *http.Response) (*http.Response, []byte) {
	t.Helper()
	req := resp.Request
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, oc.name)
	require.Equal(t, oc.status, resp.StatusCode, "%s: %s", oc.name, body)
	if oc.code != "" {
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), oc.name)
		require.Contains(t, string(body), `"code":"`+oc.code+`"`, oc.name)
	}
	c.validate(t, oc, req, resp, body)
	return resp, body
}

// validate checks one exchange against the document and records the
// documented response it produced.
func (c *openAPIChecker) validate(t *testing.T, oc openAPICall, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	ok, errs := c.v.ValidateHttpResponse(req, resp)
	require.True(t, ok, "%s: %s %s answered %d, which the document does not describe:%s\nbody: %.2000s",
		oc.name, req.Method, req.URL.RequestURI(), resp.StatusCode, describeOpenAPIErrors(errs), body)
	ok, errs = c.v.ValidateHttpRequest(req)
	switch {
	case resp.StatusCode < 400:
		require.True(t, ok, "%s: the server accepted a request the document refuses:%s", oc.name, describeOpenAPIErrors(errs))
	case oc.docRejects:
		require.False(t, ok, "%s: the document accepts a request the server refused", oc.name)
	}
	item, perrs, template := paths.FindPath(req, c.model, c.opts)
	require.NotNil(t, item, "%s: %v", oc.name, perrs)
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d", req.Method, template, resp.StatusCode)] = true
	c.mu.Unlock()
}

// requireEveryResponseSeen fails unless the exchanges produced every
// response of every operation of the document, and every SSE event type.
func (c *openAPIChecker) requireEveryResponseSeen(t *testing.T) {
	t.Helper()
	var missing []string
	for path, item := range c.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for code := range op.Responses.Codes.KeysFromOldest() {
				key := strings.ToUpper(method) + " " + path + " " + code
				if !c.seen[key] {
					missing = append(missing, key)
				}
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "documented responses no request of this test produced")
	for event := range c.sseData {
		require.Positive(t, c.sseTypes[event], "no SSE event of type %q was validated", event)
	}
}

// TestOpenAPIResponsesMatchDocument sends real requests to every route of
// the OpenAPI document, over HTTP to a server on a real database, for every
// response it documents (success, each problem, conditional and range
// answers, SSE snapshots and live streams), and validates each answer
// against the document; the document must describe nothing more than what
// the requests produced.
func TestOpenAPIResponsesMatchDocument(t *testing.T) {
	t.Parallel()
	doc := newOpenAPIChecker(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	bucket, err := export.OpenBucket(context.Background(), "file://"+t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	exportCfg := app.ExportConfig{Bucket: bucket, DownloadKey: exportDownloadKey}
	b := &exportBundle{testBundle: setupApp(t, app.Config{Exports: exportCfg}, func(c *server.Config) {
		c.Metrics = metrics.New(logger)
		c.OperatorTenants = []string{tenantA}
		c.HeartbeatInterval = 100 * time.Millisecond
	})}
	perms := append(slices.Clone(allExportPerms), app.PermissionAdmin)
	tok := b.token(t, tokenOpts{perms: perms})
	writeOnly := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite}})
	ready := b.readyExport(t, tok) // events 1-4 of project A
	list := b.url + "/api/v1/audit/events"
	stream := b.url + "/api/v1/audit/events/stream"

	t.Run("List", func(t *testing.T) {
		_, body := doc.call(t, openAPICall{name: "first page", url: list + "?projectId=proj-1&limit=1", token: tok, status: http.StatusOK})
		require.Contains(t, string(body), `"nextCursor":"`)
		q := url.Values{
			"projectId": {projectA}, "limit": {"500"}, "order": {"newest"}, "afterSequence": {"99"},
			"action": {"device.*"}, "subjectId": {"user-1"}, "resourceType": {"device"}, "resourceId": {"dev-1"},
			"outcome": {"success,failure", "DENIED"}, "occurredFrom": {"2026-01-01T00:00:00Z"}, "occurredTo": {"2026-03-01T00:00:00+01:00"},
			"sequenceFrom": {"1"}, "sequenceTo": {"3"},
		}
		doc.call(t, openAPICall{name: "every filter", url: list + "?" + q.Encode(), token: tok, status: http.StatusOK})
		_, body = doc.call(t, openAPICall{name: "last page", url: list + "?projectId=proj-1&cursor=" + nextCursorOf(t, body), token: tok, status: http.StatusOK})
		require.Contains(t, string(body), `"nextCursor":null`)

		for _, c := range []openAPICall{
			{name: "limit 0", url: list + "?projectId=proj-1&limit=0", docRejects: true},
			{name: "limit not a number", url: list + "?projectId=proj-1&limit=ten", docRejects: true},
			{name: "no projectId", url: list, docRejects: true},
			{name: "bad order", url: list + "?projectId=proj-1&order=sideways", docRejects: true},
			{name: "bad time", url: list + "?projectId=proj-1&occurredFrom=yesterday", docRejects: true},
			{name: "bad sequence", url: list + "?projectId=proj-1&sequenceFrom=-1", docRejects: true},
			{name: "unknown parameter", url: list + "?projectId=proj-1&first=5"},
			{name: "repeated parameter", url: list + "?projectId=proj-1&projectId=proj-2"},
			{name: "malformed cursor", url: list + "?projectId=proj-1&cursor=bm9wZQ"},
			{name: "bad action", url: list + "?projectId=proj-1&action=Not.Valid"},
		} {
			c.token, c.status, c.code = tok, http.StatusBadRequest, "BAD_USER_INPUT"
			doc.call(t, c)
		}
		doc.call(t, openAPICall{name: "no token", url: list + "?projectId=proj-1", status: http.StatusUnauthorized, code: "UNAUTHENTICATED"})
		doc.call(t, openAPICall{name: "bad token", url: list + "?projectId=proj-1", token: "not-a-jwt", status: http.StatusUnauthorized, code: "UNAUTHENTICATED"})
		doc.call(t, openAPICall{name: "no audit:read", url: list + "?projectId=proj-1", token: writeOnly, status: http.StatusForbidden, code: "FORBIDDEN"})
		doc.call(t, openAPICall{name: "other project", url: list + "?projectId=proj-2", token: tok, status: http.StatusNotFound, code: "NOT_FOUND"})
	})

	t.Run("Stream", func(t *testing.T) {
		_, body := doc.call(t, openAPICall{name: "snapshot", url: stream + "?projectId=proj-1", token: tok, status: http.StatusOK})
		require.Contains(t, string(body), "id: 4\nevent: audit\n")
		_, body = doc.call(t, openAPICall{name: "resumed", url: stream + "?projectId=proj-1&action=device.*&outcome=SUCCESS", token: tok,
			header: []string{"Last-Event-ID", "2"}, status: http.StatusOK})
		require.True(t, strings.HasPrefix(string(body), "id: 3\n"), "%s", body)
		doc.call(t, openAPICall{name: "empty", url: stream + "?projectId=proj-1&afterSequence=1000", token: tok, status: http.StatusOK})

		// Live: a short-lived token's stream gets the committed events, a
		// new one, heartbeats, and an error frame when the token expires.
		short := b.token(t, tokenOpts{ttl: 4 * time.Second})
		follow := openAPICall{name: "follow", url: stream + "?projectId=proj-1&follow=true", token: short, status: http.StatusOK}
		resp := doc.send(t, follow)
		b.record(t, tok, eventInput(projectA, "device.live.event"))
		_, body = doc.finish(t, follow, resp)
		require.True(t, strings.HasPrefix(string(body), "retry: 2000\n\n"), "%.200s", body)
		require.Contains(t, string(body), ": heartbeat\n\n")
		require.Contains(t, string(body), `"action":"device.live.event"`)
		require.True(t, strings.HasSuffix(string(body), "event: error\ndata: {\"code\":\"UNAUTHENTICATED\",\"message\":\"token expired\"}\n\n"), "%s", body)

		for _, c := range []openAPICall{
			{name: "bad Last-Event-ID", url: stream + "?projectId=proj-1", header: []string{"Last-Event-ID", "abc"}, docRejects: true},
			{name: "bad follow", url: stream + "?projectId=proj-1&follow=maybe", docRejects: true},
			{name: "no projectId", url: stream, docRejects: true},
			{name: "list-only parameter", url: stream + "?projectId=proj-1&limit=5"},
		} {
			c.token, c.status, c.code = tok, http.StatusBadRequest, "BAD_USER_INPUT"
			doc.call(t, c)
		}
		doc.call(t, openAPICall{name: "no token", url: stream + "?projectId=proj-1", status: http.StatusUnauthorized, code: "UNAUTHENTICATED"})
		doc.call(t, openAPICall{name: "no audit:read", url: stream + "?projectId=proj-1", token: writeOnly, status: http.StatusForbidden, code: "FORBIDDEN"})
		doc.call(t, openAPICall{name: "other project", url: stream + "?projectId=proj-2&follow=true", token: tok, status: http.StatusNotFound, code: "NOT_FOUND"})
	})

	t.Run("Download", func(t *testing.T) {
		dlURL, _ := b.createDownload(t, tok, ready.ID, nil)
		prefix, _ := tokenOfURL(t, dlURL)
		resp, body := doc.call(t, openAPICall{name: "NDJSON", url: dlURL, status: http.StatusOK})
		require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
		// An audit export's lines are AuditEvents.
		lines := strings.Split(strings.TrimSpace(string(body)), "\n")
		require.Len(t, lines, 3)
		for _, line := range lines {
			doc.requireSchema(t, "AuditEvent", line)
		}
		etag := resp.Header.Get("ETag")
		doc.call(t, openAPICall{name: "HEAD", method: http.MethodHead, url: dlURL, status: http.StatusOK})
		_, part := doc.call(t, openAPICall{name: "range", url: dlURL, header: []string{"Range", "bytes=0-9"}, status: http.StatusPartialContent})
		require.Equal(t, body[:10], part)
		resp, _ = doc.call(t, openAPICall{name: "ranges", url: dlURL, header: []string{"Range", "bytes=0-1,4-5"}, status: http.StatusPartialContent})
		require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/byteranges; boundary="))
		doc.call(t, openAPICall{name: "not modified", url: dlURL, header: []string{"If-None-Match", etag}, status: http.StatusNotModified})
		doc.call(t, openAPICall{name: "If-Match", url: dlURL, header: []string{"If-Match", `"sha256:other"`}, status: http.StatusPreconditionFailed})
		doc.call(t, openAPICall{name: "range past the end", url: dlURL, header: []string{"Range", fmt.Sprintf("bytes=%d-", len(body)+10)},
			status: http.StatusRequestedRangeNotSatisfiable})
		doc.call(t, openAPICall{name: "bad capability", url: prefix + "x", status: http.StatusForbidden, code: "FORBIDDEN"})
		doc.call(t, openAPICall{name: "HEAD bad capability", method: http.MethodHead, url: prefix + "x", status: http.StatusForbidden})
		doc.call(t, openAPICall{name: "expired capability", url: prefix + export.SignDownload(exportDownloadKey, uuid.MustParse(ready.ID), tenantA, time.Now().Add(-time.Second)),
			status: http.StatusForbidden, code: "FORBIDDEN"})

		gz := b.requestExport(t, tok, exportInput(map[string]any{"format": "CSV", "compression": "GZIP"}))
		b.runExport(t, tenantA, gz.ID)
		gzURL, _ := b.createDownload(t, tok, gz.ID, nil)
		resp, _ = doc.call(t, openAPICall{name: "CSV, gzip", url: gzURL, status: http.StatusOK})
		require.Equal(t, "application/gzip", resp.Header.Get("Content-Type"))
		csv := b.requestExport(t, tok, exportInput(map[string]any{"format": "CSV"}))
		b.runExport(t, tenantA, csv.ID)
		csvURL, _ := b.createDownload(t, tok, csv.ID, nil)
		resp, _ = doc.call(t, openAPICall{name: "CSV", url: csvURL, status: http.StatusOK})
		require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))

		b.expireExport(t, tok, ready.ID)
		doc.call(t, openAPICall{name: "expired export", url: dlURL, status: http.StatusGone, code: "INVALID_STATE"})
		doc.call(t, openAPICall{name: "HEAD expired export", method: http.MethodHead, url: dlURL, status: http.StatusGone})
	})

	t.Run("Service", func(t *testing.T) {
		resp, body := doc.call(t, openAPICall{name: "document", url: b.url + "/api/v1/openapi.json", status: http.StatusOK})
		require.Equal(t, openapi.Document, body, "the served document is the embedded one")
		doc.call(t, openAPICall{name: "document not modified", url: b.url + "/api/v1/openapi.json", header: []string{"If-None-Match", resp.Header.Get("ETag")},
			status: http.StatusNotModified})
		resp, body = doc.call(t, openAPICall{name: "checkpoint keys", url: b.url + "/.well-known/aether/checkpoint-keys", status: http.StatusOK})
		require.Equal(t, "application/jwk-set+json", resp.Header.Get("Content-Type"))
		require.Contains(t, string(body), `"crv":"Ed25519"`)
		doc.call(t, openAPICall{name: "checkpoint keys not modified", url: b.url + "/.well-known/aether/checkpoint-keys",
			header: []string{"If-None-Match", resp.Header.Get("ETag")}, status: http.StatusNotModified})
		doc.call(t, openAPICall{name: "healthz", url: b.url + "/healthz", status: http.StatusOK})
		doc.call(t, openAPICall{name: "readyz", url: b.url + "/readyz", status: http.StatusOK})
		notReady := errors.New("database unreachable")
		b.ready.Store(&notReady)
		doc.call(t, openAPICall{name: "not ready", url: b.url + "/readyz", status: http.StatusServiceUnavailable})
		b.ready.Store(nil)
	})

	t.Run("Metrics", func(t *testing.T) {
		doc.call(t, openAPICall{name: "admin", url: b.url + "/metrics", token: tok, status: http.StatusOK})
		doc.call(t, openAPICall{name: "no token", url: b.url + "/metrics", status: http.StatusUnauthorized, code: "UNAUTHENTICATED"})
		doc.call(t, openAPICall{name: "not an admin", url: b.url + "/metrics", token: writeOnly, status: http.StatusForbidden, code: "FORBIDDEN"})
	})

	t.Run("TooManyStreams", func(t *testing.T) {
		// One live stream per identity and one stream start per 100 s: the
		// second stream is over the connection quota, and once the first
		// has ended, a new one is over the rate limit.
		r := setupApp(t, app.Config{RateLimits: app.RateLimitConfig{
			SubscriptionsPerIdentity: app.RateLimit{Rate: 0.01, Burst: 1},
		}}, func(c *server.Config) { c.MaxWebSocketsPerIdentity = 1 })
		tok := r.token(t, tokenOpts{})
		live := r.openLive(t, tok, "/api/v1/audit/events/stream?follow=true&projectId=proj-1")
		require.Equal(t, http.StatusOK, live.resp.StatusCode)
		follow := r.url + "/api/v1/audit/events/stream?follow=true&projectId=proj-1"
		doc.call(t, openAPICall{name: "second stream", url: follow, token: tok, status: http.StatusTooManyRequests, code: "QUOTA_EXCEEDED"})
		require.NoError(t, live.resp.Body.Close())
		require.Eventually(t, func() bool {
			resp := r.getPath(t, tok, "/api/v1/audit/events/stream?follow=true&projectId=proj-1")
			raw, _ := io.ReadAll(resp.Body)
			return !strings.Contains(string(raw), "QUOTA_EXCEEDED")
		}, 10*time.Second, 20*time.Millisecond, "the first stream's slot is released")
		resp, _ := doc.call(t, openAPICall{name: "rate limited", url: follow, token: tok, status: http.StatusTooManyRequests, code: "RATE_LIMITED"})
		require.Equal(t, "100", resp.Header.Get("Retry-After"))
	})

	t.Run("Internal", func(t *testing.T) {
		// A server whose database is gone answers INTERNAL everywhere.
		broken := storetest.NewPool(t)
		broken.Close()
		i := setup(t, func(c *server.Config) {
			c.App = app.New(store.New(broken), app.Config{Logger: logger, Exports: exportCfg})
		})
		tok := i.token(t, tokenOpts{})
		doc.call(t, openAPICall{name: "list", url: i.url + "/api/v1/audit/events?projectId=proj-1", token: tok, status: http.StatusInternalServerError, code: "INTERNAL"})
		doc.call(t, openAPICall{name: "stream", url: i.url + "/api/v1/audit/events/stream?projectId=proj-1", token: tok, status: http.StatusInternalServerError, code: "INTERNAL"})
		capability := export.SignDownload(exportDownloadKey, uuid.MustParse(ready.ID), tenantA, time.Now().Add(time.Hour))
		doc.call(t, openAPICall{name: "download", url: i.url + "/api/v1/exports/download/" + capability, status: http.StatusInternalServerError, code: "INTERNAL"})
	})

	doc.requireEveryResponseSeen(t)
}

// nextCursorOf is a list page's nextCursor.
func nextCursorOf(t *testing.T, body []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(body), `"nextCursor":"`)
	require.True(t, ok, "%s", body)
	cursor, _, ok := strings.Cut(rest, `"`)
	require.True(t, ok)
	return url.QueryEscape(cursor)
}
