package server

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// downloadExport streams a READY export's object to the holder of a
// download capability (the path's last segment): no other credential is
// needed, since browsers and curl follow such links as they are. It sets
// Content-Length, Content-Type, Content-Disposition and the object's SHA-256
// as Repr-Digest (RFC 9530) and Digest, and serves Range requests. A
// malformed, tampered or expired capability answers 403; an expired export
// 410.
func (s *Server) downloadExport(w http.ResponseWriter, r *http.Request) {
	opened, err := s.cfg.App.OpenDataExportDownload(r.Context(), r.PathValue("token"))
	if err != nil {
		// Problems name the route, never the capability.
		r = r.Clone(r.Context())
		r.URL.Path = "/api/v1/exports/download/{token}"
		switch {
		case errors.Is(err, app.ErrDownloadForbidden):
			writeProblemStatus(w, r, http.StatusForbidden, app.ErrorOf(err))
		case errors.Is(err, app.ErrDownloadGone):
			writeProblemStatus(w, r, http.StatusGone, app.ErrorOf(err))
		default:
			s.writeAppError(w, r, err)
		}
		return
	}
	defer opened.Object.Close()
	// A large file takes as long as the client needs: each write is bounded
	// instead of the whole response.
	w = streamDeadlines(w, s.cfg.WriteTimeout)
	e := opened.Export
	h := w.Header()
	h.Set("Content-Type", exportContentType(e))
	h.Set("Content-Disposition", `attachment; filename="`+exportFileName(e)+`"`)
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if sum, err := hex.DecodeString(strings.TrimPrefix(e.ContentDigest, "sha256:")); err == nil {
		b64 := base64.StdEncoding.EncodeToString(sum)
		h.Set("Repr-Digest", "sha-256=:"+b64+":")
		h.Set("Digest", "SHA-256="+b64)
	}
	h.Set("ETag", strconv.Quote(e.ContentDigest))
	if rh := r.Header.Get("Range"); rh != "" {
		coalesced, ok := coalesceRanges(rh, int64(e.ByteLength))
		if !ok {
			h.Set("Content-Range", "bytes */"+strconv.FormatUint(e.ByteLength, 10))
			http.Error(w, "requested range not satisfiable: more than "+strconv.Itoa(maxDownloadRanges)+" ranges", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		r.Header.Set("Range", coalesced)
	}
	// ServeContent answers Range and conditional requests and sets
	// Content-Length; the object reader seeks by opening range reads, one
	// per range of the (coalesced) request.
	http.ServeContent(w, r, "", *e.ReadyAt, opened.Object)
}

// exportContentType is the media type of an export's object as stored.
func exportContentType(e domain.DataExport) string {
	switch {
	case e.Compression == domain.DataExportGzip:
		return "application/gzip"
	case e.Format == domain.DataExportCSV:
		return "text/csv; charset=utf-8"
	default:
		return "application/x-ndjson"
	}
}

// exportFileName is the suggested file name of an export's download.
func exportFileName(e domain.DataExport) string {
	name := "export-" + e.ID.String() + "." + strings.ToLower(string(e.Format))
	if e.Compression == domain.DataExportGzip {
		name += ".gz"
	}
	return name
}
