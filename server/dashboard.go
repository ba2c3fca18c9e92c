package server

import (
	"net/http"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/web"
)

// mountDashboard serves the dashboard page at GET /dashboard (and
// /dashboard/) and its files under /dashboard/. The page and its files are
// public: the bearer token travels in the URL fragment, which browsers never
// send, and the page then keeps it in sessionStorage.
func (s *Server) mountDashboard() {
	assets := readStaticAssets(web.Files, "dashboard")
	serve := func(w http.ResponseWriter, r *http.Request, name string) {
		asset, ok := assets[name]
		if !ok {
			writeProblem(w, r, &app.Error{Code: app.CodeNotFound, Message: "no such dashboard file"})
			return
		}
		serveStaticAsset(w, r, asset, pageCSP(r))
	}
	index := func(w http.ResponseWriter, r *http.Request) { serve(w, r, "index.html") }
	s.mux.HandleFunc("GET /dashboard", index)
	s.mux.HandleFunc("GET /dashboard/{$}", index)
	s.mux.HandleFunc("GET /dashboard/{file...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "index.html" {
			index(w, r)
			return
		}
		serve(w, r, name)
	})
}
