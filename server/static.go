package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
)

// The browser pages (the dashboard and GraphiQL) share these: their embedded
// files read once, the security headers, and the Content-Security-Policy.

// staticAsset is one embedded file of a page, ready to serve.
type staticAsset struct {
	content     []byte
	contentType string
	etag        string
}

// readStaticAssets reads the embedded files of a page once: path within
// fsys to file. It panics when the files cannot be read or have no
// index.html, which is a build error, not a runtime condition.
func readStaticAssets(fsys fs.FS, what string) map[string]staticAsset {
	assets := map[string]staticAsset{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(content)
		assets[name] = staticAsset{
			content:     content,
			contentType: staticContentType(name),
			etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
		}
		return nil
	})
	if err != nil {
		panic("reading the embedded " + what + ": " + err.Error())
	}
	if _, ok := assets["index.html"]; !ok {
		panic("the embedded " + what + " has no index.html")
	}
	return assets
}

// staticContentType names the media type of an embedded file by its
// extension, independent of the host's MIME database.
func staticContentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".txt":
		return "text/plain; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// hostPattern is what a Host header may hold to be named in the
// Content-Security-Policy (host, IPv4, [IPv6], optional port).
var hostPattern = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)

// pageCSP is a page's Content-Security-Policy: only its own scripts and
// styles (no inline code; styleSrc adds sources to style-src), connections
// only to this service (HTTP and its WebSocket, which older browsers do not
// count as 'self'), no frames, no plugins, no form posts.
func pageCSP(r *http.Request, styleSrc ...string) string {
	connect := "'self'"
	if hostPattern.MatchString(r.Host) {
		connect += " ws://" + r.Host + " wss://" + r.Host
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		strings.Join(append([]string{"style-src 'self'"}, styleSrc...), " "),
		"img-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// setPageHeaders sets the security headers of every page file: the policy,
// no sniffing, no referrer, no framing, no shared browsing context.
func setPageHeaders(h http.Header, contentType, csp string) {
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// serveStaticAsset writes one embedded file with the page headers. The files
// are not content-addressed: browsers revalidate each time (a 304 when the
// ETag still matches), so an upgrade is seen at once.
func serveStaticAsset(w http.ResponseWriter, r *http.Request, asset staticAsset, csp string) {
	h := w.Header()
	setPageHeaders(h, asset.contentType, csp)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", asset.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(asset.content))
}
