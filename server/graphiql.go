package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/web"
)

// graphiqlNoncePlaceholder is where index.html of the GraphiQL page takes
// the style nonce of each response.
const graphiqlNoncePlaceholder = "{{CSP_NONCE}}"

// mountGraphiQL serves the GraphiQL IDE (web/graphiql, bundled by `make
// graphiql`) at GET /graphiql (and /graphiql/) and its files under
// /graphiql/. Like the dashboard, the page is public and holds no data: the
// bearer token travels in the URL fragment or is pasted into its sign-in
// form, and every GraphQL request carries it.
//
// Its policy is the dashboard's with one addition: style-src allows a fresh
// nonce per response. Libraries inside GraphiQL insert <style> elements at
// run time (Radix's scroll lock of dialogs, React Aria's touch and scroll
// rules); they take the nonce from the page (index.html, <meta
// property="csp-nonce">), so no 'unsafe-inline' is needed. Scripts stay
// 'self' only, without 'unsafe-eval'.
func (s *Server) mountGraphiQL() {
	assets := readStaticAssets(web.GraphiQL, "GraphiQL page")
	index := assets["index.html"].content
	if bytes.Count(index, []byte(graphiqlNoncePlaceholder)) != 1 {
		panic("the embedded GraphiQL page must hold " + graphiqlNoncePlaceholder + " exactly once")
	}
	page := func(w http.ResponseWriter, r *http.Request) {
		nonce := graphiqlNonce()
		body := bytes.Replace(index, []byte(graphiqlNoncePlaceholder), []byte(nonce), 1)
		h := w.Header()
		setPageHeaders(h, "text/html; charset=utf-8", pageCSP(r, "'nonce-"+nonce+"'"))
		// Each response has its own nonce: never reuse one.
		h.Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	}
	s.mux.HandleFunc("GET /graphiql", page)
	s.mux.HandleFunc("GET /graphiql/{$}", page)
	s.mux.HandleFunc("GET /graphiql/{file...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "index.html" {
			page(w, r)
			return
		}
		asset, ok := assets[name]
		if !ok {
			writeProblem(w, r, &app.Error{Code: app.CodeNotFound, Message: "no such GraphiQL file"})
			return
		}
		serveStaticAsset(w, r, asset, pageCSP(r))
	})
}

// graphiqlNonce is a fresh CSP nonce: 128 random bits, base64url.
func graphiqlNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
