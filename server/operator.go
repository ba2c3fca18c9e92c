package server

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"riverqueue.com/riverui"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
)

// The River UI mount and its sign-in.
const (
	// RiverUIPrefix is where River UI is mounted.
	RiverUIPrefix = "/riverui"
	// riverUISignIn exchanges a bearer token for the River UI cookie.
	riverUISignIn = RiverUIPrefix + "/sign-in"
	// riverUISignOut drops the cookie.
	riverUISignOut = RiverUIPrefix + "/sign-out"
	// RiverUICookie holds the opaque id of an admin's River UI browser
	// session (never the token), scoped to RiverUIPrefix.
	RiverUICookie = "aether_riverui"
)

// adminOnly lets only identities with the admin permission reach next; the
// identity must already be in the context (authenticated). Others get 403.
func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.isOperator(app.IdentityFromContext(r.Context())) {
			writeProblem(w, r, &app.Error{Code: app.CodeForbidden, Message: "this endpoint requires the admin permission of an operator tenant"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// MetricsHandler serves the Prometheus metrics without authentication, for
// a separate listener on a private network (the main listener's /metrics
// answers admins only). It is nil when Config.Metrics is nil.
func (s *Server) MetricsHandler() http.Handler {
	if s.cfg.Metrics == nil {
		return nil
	}
	return s.cfg.Metrics.Handler()
}

// mountOperatorSurfaces adds /metrics and River UI, when configured.
func (s *Server) mountOperatorSurfaces() error {
	if s.cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", s.authenticated(s.adminOnly(s.cfg.Metrics.Handler()), problemUnauthenticated))
	}
	if s.cfg.River == nil {
		return nil
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(s.cfg.River, nil),
		Logger:    s.cfg.Logger,
		Prefix:    RiverUIPrefix,
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	if err := ui.Start(ctx); err != nil {
		stop()
		return err
	}
	s.stopRiverUI = stop
	// Literal patterns (riverUISignIn, riverUISignOut, RiverUIPrefix), so
	// that the isolation test's route scan reads them.
	s.mux.HandleFunc("GET /riverui/sign-in", s.riverUISignInPage)
	s.mux.HandleFunc("POST /riverui/sign-in", s.riverUISignIn)
	s.mux.HandleFunc("POST /riverui/sign-out", s.riverUISignOut)
	s.mux.Handle("/riverui/", s.riverUIAuth(ui))
	return nil
}

// riverUIAuth admits River UI requests of admin identities only: River UI
// has no authentication of its own and shows every tenant's jobs. The
// token comes from the Authorization header or, for a browser, from the
// River UI cookie set by the sign-in. A request that changes state with
// the cookie must come from the service's own origin (Origin, else
// Referer): SameSite=Strict already keeps other sites' requests from
// carrying the cookie, and this check holds even where it would not.
func (s *Server) riverUIAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, fromHeader := auth.BearerToken(r.Header.Get("Authorization"))
		var id app.Identity
		switch {
		case fromHeader:
			var err error
			if id, err = s.cfg.Verifier.Verify(token); err != nil {
				msg := "invalid token"
				if errors.Is(err, auth.ErrTokenExpired) {
					msg = "token expired"
				}
				problemUnauthenticated(w, r, msg)
				return
			}
		default:
			c, err := r.Cookie(RiverUICookie)
			if err != nil || c.Value == "" {
				if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
					http.Redirect(w, r, riverUISignIn, http.StatusSeeOther)
					return
				}
				problemUnauthenticated(w, r, "a bearer token is required")
				return
			}
			var ok bool
			if id, ok = s.riverUISessions.identity(c.Value, time.Now()); !ok {
				s.clearRiverUICookie(w, r)
				problemUnauthenticated(w, r, "session ended: sign in again")
				return
			}
		}
		if !s.isOperator(id) {
			writeProblem(w, r, &app.Error{Code: app.CodeForbidden, Message: "River UI requires the admin permission of an operator tenant"})
			return
		}
		if !fromHeader && !isSafeMethod(r.Method) && !s.sameOrigin(r) {
			writeProblem(w, r, &app.Error{Code: app.CodeForbidden, Message: "cross-origin request refused"})
			return
		}
		next.ServeHTTP(w, r.WithContext(app.ContextWithIdentity(r.Context(), id)))
	})
}

func isSafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether a browser request names the service's own
// origin (the public URL's, else the request's host) in Origin or, without
// it, Referer. A request with neither is refused.
func (s *Server) sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	u, err := url.Parse(src)
	if src == "" || err != nil || u.Host == "" {
		return false
	}
	if s.cfg.PublicURL != "" {
		pub, err := url.Parse(s.cfg.PublicURL)
		return err == nil && strings.EqualFold(pub.Scheme, u.Scheme) && strings.EqualFold(pub.Host, u.Host)
	}
	return strings.EqualFold(u.Host, r.Host)
}

// secureCookies reports whether cookies must be Secure: the service is
// reached over https (directly or by its public URL).
func (s *Server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicURL), "https://")
}

var signInPage = template.Must(template.New("sign-in").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Aether Audit · River UI sign-in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}
textarea{width:100%;font:13px monospace}button{margin-top:.5rem;padding:.4rem 1rem}.err{color:#b00020}</style></head>
<body><h1>River UI</h1>
<p>Paste a bearer token with the <code>admin</code> permission. It is kept in a cookie for this page only, until the token expires.</p>
{{if .}}<p class="err">{{.}}</p>{{end}}
<form method="post" action="sign-in"><textarea name="token" rows="6" required autocomplete="off"></textarea>
<button type="submit">Sign in</button></form></body></html>
`))

// riverUISignInPage shows the form that exchanges a token for the cookie.
func (s *Server) riverUISignInPage(w http.ResponseWriter, _ *http.Request) {
	writeSignInPage(w, http.StatusOK, "")
}

func writeSignInPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = signInPage.Execute(w, msg)
}

// riverUISignIn verifies the posted token, refuses one without the admin
// permission, opens a session and sets the River UI cookie to its opaque
// id (never the token): HttpOnly, SameSite=Strict, Secure over https,
// scoped to RiverUIPrefix, ending with the session (riverUISessionTTL at
// most, and no later than the token).
func (s *Server) riverUISignIn(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) {
		writeProblem(w, r, &app.Error{Code: app.CodeForbidden, Message: "cross-origin request refused"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	if t, ok := auth.BearerToken(token); ok {
		token = t
	}
	id, err := s.cfg.Verifier.Verify(token)
	switch {
	case token == "" || err != nil:
		writeSignInPage(w, http.StatusUnauthorized, "That token is not valid (or it expired).")
		return
	case !s.isOperator(id):
		writeSignInPage(w, http.StatusForbidden, "That token does not have the admin permission of an operator tenant.")
		return
	}
	sid, expires := s.riverUISessions.open(id, time.Now())
	http.SetCookie(w, &http.Cookie{
		Name: RiverUICookie, Value: sid, Path: RiverUIPrefix + "/",
		Expires: expires, MaxAge: max(int(time.Until(expires).Seconds()), 1),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookies(r),
	})
	http.Redirect(w, r, RiverUIPrefix+"/", http.StatusSeeOther)
}

// riverUISignOut ends the session and drops the River UI cookie.
func (s *Server) riverUISignOut(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) {
		writeProblem(w, r, &app.Error{Code: app.CodeForbidden, Message: "cross-origin request refused"})
		return
	}
	if c, err := r.Cookie(RiverUICookie); err == nil {
		s.riverUISessions.close(c.Value)
	}
	s.clearRiverUICookie(w, r)
	http.Redirect(w, r, riverUISignIn, http.StatusSeeOther)
}

func (s *Server) clearRiverUICookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: RiverUICookie, Value: "", Path: RiverUIPrefix + "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookies(r)})
}

// isOperator reports whether id may use the operator surfaces (metrics and
// River UI), which show and act on every tenant's figures and jobs: the
// admin permission of one of Config.OperatorTenants ("*" for any tenant).
// Without operator tenants nobody may.
func (s *Server) isOperator(id app.Identity) bool {
	if !id.HasPermission(app.PermissionAdmin) {
		return false
	}
	return slices.Contains(s.cfg.OperatorTenants, id.TenantID) || slices.Contains(s.cfg.OperatorTenants, "*")
}
