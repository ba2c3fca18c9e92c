package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
)

// serveCheckpointKeys serves GET /.well-known/aether/checkpoint-keys: the
// public keys that verify audit checkpoints (the signing key's and the
// retired ones) as a JWKS, without authentication, readable from any
// origin, cacheable for an hour and revalidated with its ETag.
func (s *Server) serveCheckpointKeys(w http.ResponseWriter, r *http.Request) {
	body := s.cfg.App.CheckpointKeys()
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("Access-Control-Allow-Origin", "*")
	if etagListed(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/jwk-set+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}
