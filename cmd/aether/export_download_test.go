package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeExport is what fakeExportServer serves: one export, as the GraphQL
// API describes it and as its download link streams it, with faults.
type fakeExport struct {
	state         string
	failureReason string
	digest        []byte // contentDigest
	length        int    // byteLength
	body          []byte // served bytes
	reprDigest    *string
	contentLength *int // announced, when not len(body); -1: none (chunked)
	cut           int  // serve only this many bytes, when > 0
	stall         bool // send the headers and then nothing
	downloadCode  int
	gqlErrors     []map[string]any
}

const (
	fakeExportID   = "0197a0b4-1f9e-7c3a-9d2e-4b5c6d7e8f90"
	fakeToken      = "fake-token-value"
	fakeCapability = "capability-that-must-stay-secret"
)

// fakeExportServer serves /graphql (dataExport, createDataExportDownload)
// and the download link of e, a path relative to the server.
func fakeExportServer(t *testing.T, e fakeExport) string {
	t.Helper()
	stalled := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{
				"message": "missing or invalid token", "extensions": map[string]any{"code": "UNAUTHENTICATED"}}}})
			return
		}
		var req struct {
			Query     string
			Variables map[string]any
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if e.gqlErrors != nil {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": nil, "errors": e.gqlErrors})
			return
		}
		var data map[string]any
		if strings.Contains(req.Query, "createDataExportDownload") {
			in, _ := req.Variables["in"].(map[string]any)
			if in["exportId"] != fakeExportID || in["ttlSeconds"] != float64(600) {
				http.Error(w, "unexpected input", http.StatusBadRequest)
				return
			}
			data = map[string]any{"createDataExportDownload": map[string]any{
				"url": "/api/v1/exports/download/" + fakeCapability, "expiresAt": time.Now().Add(10 * time.Minute)}}
		} else {
			if req.Variables["id"] != fakeExportID {
				data = map[string]any{"dataExport": nil}
			} else {
				ex := map[string]any{"id": fakeExportID, "state": e.state, "format": "NDJSON", "compression": "NONE",
					"contentDigest": nil, "byteLength": nil, "failureReason": nil}
				if e.state == "READY" {
					ex["contentDigest"] = "sha256:" + hex.EncodeToString(e.digest)
					ex["byteLength"] = strconv.Itoa(e.length)
				}
				if e.failureReason != "" {
					ex["failureReason"] = e.failureReason
				}
				data = map[string]any{"dataExport": ex}
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	})
	mux.HandleFunc("GET /api/v1/exports/download/{token}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("token") != fakeCapability || r.Header.Get("Authorization") != "" {
			http.Error(w, "bad capability", http.StatusForbidden)
			return
		}
		if e.downloadCode != 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(e.downloadCode)
			_, _ = w.Write([]byte(`{"title":"Forbidden","status":403,"code":"FORBIDDEN","detail":"the download link is invalid or has expired; create a new one"}`))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Content-Disposition", `attachment; filename="export-`+fakeExportID+`.ndjson"`)
		if e.reprDigest != nil {
			h.Set("Repr-Digest", *e.reprDigest)
		}
		switch {
		case e.contentLength == nil:
			h.Set("Content-Length", strconv.Itoa(len(e.body)))
		case *e.contentLength >= 0:
			h.Set("Content-Length", strconv.Itoa(*e.contentLength))
		}
		w.WriteHeader(http.StatusOK)
		body := e.body
		if e.cut > 0 {
			body = body[:e.cut]
		}
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
		if e.stall {
			<-stalled
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { close(stalled); srv.Close() })
	return srv.URL
}

// goodExport is a consistent export of body.
func goodExport(body []byte) fakeExport {
	sum := sha256.Sum256(body)
	repr := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	return fakeExport{state: "READY", digest: sum[:], length: len(body), body: body, reprDigest: &repr}
}

// TestExportDownloadVerifies runs `aether export download` against a fake
// server: a consistent download lands under its final name; every
// inconsistency (bytes, length, digests, a cut or stalled stream) fails
// with a message, leaves no file (an existing one untouched) and never
// prints the token or the download capability.
func TestExportDownloadVerifies(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte(`{"action":"device.firmware.updated","sequence":"1"}`+"\n"), 2000)

	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		base := fakeExportServer(t, goodExport(body))
		out := t.TempDir()
		stdout, stderr, code := run(t, []string{"AETHER_TOKEN=" + fakeToken}, "export", "download", fakeExportID, "--url", base, "-o", out)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		require.Empty(t, stdout)
		got, err := os.ReadFile(filepath.Join(out, "export-"+fakeExportID+".ndjson"))
		require.NoError(t, err)
		require.Equal(t, body, got)
		entries, err := os.ReadDir(out)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file left")
		require.NotContains(t, stderr, fakeCapability)
	})

	otherSum := sha256.Sum256([]byte("something else"))
	otherRepr := "sha-256=:" + base64.StdEncoding.EncodeToString(otherSum[:]) + ":"
	noLength, longer := -1, len(body)+10
	corrupt := bytes.Clone(body)
	corrupt[100] ^= 1
	for _, tc := range []struct {
		name   string
		mutate func(*fakeExport)
		id     string
		args   []string
		want   string
	}{
		{"corrupt bytes", func(e *fakeExport) { e.body = corrupt }, "", nil, "digest mismatch"},
		{"extra bytes", func(e *fakeExport) { e.body = append(bytes.Clone(body), "extra"...); e.contentLength = &noLength }, "", nil, "length mismatch"},
		{"cut stream", func(e *fakeExport) { e.cut = len(body) / 2 }, "", nil, "download failed after"},
		{"stalled stream", func(e *fakeExport) { e.cut = 10; e.stall = true }, "", []string{"--idle-timeout", "300ms"}, "no data received for 300ms"},
		{"announced length", func(e *fakeExport) { e.contentLength = &longer }, "", nil, "announces"},
		{"Repr-Digest differs", func(e *fakeExport) { e.reprDigest = &otherRepr }, "", nil, "differs from the export's contentDigest"},
		{"no Repr-Digest", func(e *fakeExport) { e.reprDigest = nil }, "", nil, "no sha-256 Repr-Digest"},
		{"contentDigest differs", func(e *fakeExport) { e.digest = otherSum[:]; e.reprDigest = &otherRepr }, "", nil, "digest mismatch"},
		{"running", func(e *fakeExport) { e.state = "RUNNING" }, "", nil, "RUNNING, not READY"},
		{"failed", func(e *fakeExport) { e.state = "FAILED"; e.failureReason = "the export exceeded 5 GiB" }, "", nil, "FAILED: the export exceeded 5 GiB"},
		{"expired", func(e *fakeExport) { e.state = "EXPIRED" }, "", nil, "EXPIRED"},
		{"GraphQL error", func(e *fakeExport) {
			e.gqlErrors = []map[string]any{{"message": "database unavailable", "extensions": map[string]any{"code": "INTERNAL"}}}
		}, "", nil, "INTERNAL: database unavailable"},
		{"download refused", func(e *fakeExport) { e.downloadCode = http.StatusForbidden }, "", nil, "HTTP 403: FORBIDDEN: the download link is invalid"},
		{"unknown id", nil, "0197a0b4-0000-7000-8000-000000000000", nil, "not found"},
		{"wrong token", nil, "", []string{"--token", "other"}, "UNAUTHENTICATED: missing or invalid token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := goodExport(body)
			if tc.mutate != nil {
				tc.mutate(&e)
			}
			base := fakeExportServer(t, e)
			out := t.TempDir()
			target := filepath.Join(out, "export.ndjson")
			require.NoError(t, os.WriteFile(target, []byte("previous download"), 0o600))

			id := fakeExportID
			if tc.id != "" {
				id = tc.id
			}
			args := append([]string{"export", "download", id, "--url", base, "-o", target}, tc.args...)
			stdout, stderr, code := run(t, []string{"AETHER_TOKEN=" + fakeToken}, args...)
			require.NotEqual(t, 0, code, "stderr: %s", stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tc.want)
			require.NotContains(t, stderr, fakeToken)
			require.NotContains(t, stderr, fakeCapability)

			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no partial file left")
			got, err := os.ReadFile(target)
			require.NoError(t, err)
			require.Equal(t, "previous download", string(got), "the existing file is untouched")
		})
	}

	t.Run("corrupt to stdout", func(t *testing.T) {
		t.Parallel()
		e := goodExport(body)
		e.body = corrupt
		base := fakeExportServer(t, e)
		_, stderr, code := run(t, []string{"AETHER_TOKEN=" + fakeToken, "AETHER_URL=" + base}, "export", "download", fakeExportID, "-o", "-")
		require.NotEqual(t, 0, code)
		require.Contains(t, stderr, "digest mismatch")
		require.Contains(t, stderr, "discard it")
	})
}

func TestReprDigestSHA256(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	for _, values := range [][]string{
		{"sha-256=:" + b64 + ":"},
		{"sha-512=:AAAA:, sha-256=:" + b64 + ":"},
		{"unixsum=:AAAA:", "sha-256=:" + b64 + ":;p=1"},
	} {
		got, err := reprDigestSHA256(values)
		require.NoError(t, err, "%q", values)
		require.Equal(t, sum[:], got, "%q", values)
	}
	for _, values := range [][]string{nil, {""}, {"sha-512=:AAAA:"}, {"sha-256=" + b64}, {"sha-256=:AAAA:"}, {"sha-256=:not base64!:"}} {
		_, err := reprDigestSHA256(values)
		require.Error(t, err, "%q", values)
	}
}

func TestSafeFileName(t *testing.T) {
	require.Equal(t, "export-1.ndjson.gz", safeFileName("export-1.ndjson.gz"))
	for _, bad := range []string{"", ".", "..", ".hidden", "../x", "a/b", `a\b`, "/etc/passwd", "a\nb", "a\x00b", strings.Repeat("a", 256)} {
		require.Empty(t, safeFileName(bad), "%q", bad)
	}
}
