package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/aetheriot/aether-audit/app"
)

// problem is an RFC 9457 problem details body.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Code     app.Code `json:"code"`
	Field    string   `json:"field,omitempty"`
	Instance string   `json:"instance,omitempty"`
}

// problemTypeBase prefixes problem types; the code names the problem.
const problemTypeBase = "https://aether.invalid/problems/"

// writeProblem answers err as application/problem+json with the status of
// its code.
func writeProblem(w http.ResponseWriter, r *http.Request, err *app.Error) {
	writeProblemStatus(w, r, err.Code.HTTPStatus(), err)
}

// writeProblemStatus is writeProblem with a status other than the code's
// usual one (a download's 403 and 410).
func writeProblemStatus(w http.ResponseWriter, r *http.Request, status int, err *app.Error) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	if err.Code == app.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="aether"`)
	}
	if err.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(app.RetryAfterSeconds(err.RetryAfter), 10))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{
		Type:     problemTypeBase + string(err.Code),
		Title:    http.StatusText(status),
		Status:   status,
		Detail:   err.Error(),
		Code:     err.Code,
		Field:    err.Field,
		Instance: r.URL.Path,
	})
}

func problemUnauthenticated(w http.ResponseWriter, r *http.Request, msg string) {
	writeProblem(w, r, &app.Error{Code: app.CodeUnauthenticated, Message: msg})
}

// graphQLError answers a request refused before GraphQL execution with a
// GraphQL-shaped error body.
func graphQLError(w http.ResponseWriter, status int, code app.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if code == app.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="aether"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{"message": msg, "extensions": map[string]any{"code": code}}},
	})
}

func graphQLUnauthenticated(w http.ResponseWriter, _ *http.Request, msg string) {
	graphQLError(w, http.StatusUnauthorized, app.CodeUnauthenticated, msg)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	default:
		return strconv.FormatInt(n, 10) + " bytes"
	}
}
