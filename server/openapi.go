package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/aetheriot/aether-audit/server/openapi"
)

// openAPIETag is the strong ETag of the embedded OpenAPI document.
var openAPIETag = func() string {
	sum := sha256.Sum256(openapi.Document)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// serveOpenAPI serves GET /api/v1/openapi.json: the OpenAPI document of the
// REST and SSE endpoints, public, readable from any origin, revalidated with
// its ETag (304 when If-None-Match names it).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("ETag", openAPIETag)
	h.Set("Cache-Control", "no-cache")
	if etagListed(r.Header.Get("If-None-Match"), openAPIETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openapi.Document)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(openapi.Document)
}

// etagListed reports whether an If-None-Match value names etag (weakly
// compared, as RFC 9110 asks for If-None-Match) or is "*".
func etagListed(ifNoneMatch, etag string) bool {
	for _, v := range strings.Split(ifNoneMatch, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}
