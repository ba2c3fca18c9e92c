package server

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	gojson "github.com/goccy/go-json"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/aetheriot/aether-audit/graph/fastpath"
)

// jsonPOST is the GraphQL-over-HTTP POST transport (application/json). It
// behaves as gqlgen's own, except that it writes the executor's response
// data as produced instead of re-encoding it, which on large pages costs as
// much as producing it, and that it offers each request to the ingest fast
// path (fastpath.Paths.TryServe) before the generic executor.
type jsonPOST struct {
	fast *fastpath.Paths
	// maxSelections is operationShape's limit: the fast path is offered
	// only documents of an acceptable shape (it plans and validates them
	// itself, before the executor's extensions run).
	maxSelections int
}

// postBody is a GraphQL-over-HTTP request body; variables stay raw until
// the fast path has had its look.
type postBody struct {
	Query         string            `json:"query"`
	OperationName string            `json:"operationName"`
	Variables     gojson.RawMessage `json:"variables"`
	Extensions    map[string]any    `json:"extensions"`
}

var _ graphql.Transport = jsonPOST{}

// Supports implements graphql.Transport.
func (jsonPOST) Supports(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != "" {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mediaType == "application/json"
}

// Do implements graphql.Transport.
func (t jsonPOST) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	media := responseMedia(w, r)
	start := graphql.Now()
	raw, err := bodyBytes(r)
	var body postBody
	if err == nil {
		dec := gojson.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		err = dec.Decode(&body)
	}
	params := graphql.RawParams{Query: body.Query, OperationName: body.OperationName, Extensions: body.Extensions}
	if err == nil && len(body.Extensions) == 0 && t.fast != nil && checkShape(body.Query, t.maxSelections) == "" {
		// Checked once: operationShape does not scan this document again.
		ctx = context.WithValue(ctx, shapeCheckedKey{}, body.Query)
		if t.fast.TryServe(ctx, w, body.Query, body.OperationName, json.RawMessage(body.Variables)) {
			return
		}
	}
	if err == nil && len(body.Variables) > 0 && string(body.Variables) != "null" {
		vars := gojson.NewDecoder(bytes.NewReader(body.Variables))
		vars.UseNumber()
		err = vars.Decode(&params.Variables)
	}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeRequestError(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("request body is not valid GraphQL-over-HTTP JSON")}))
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	executeGraphQL(ctx, w, exec, &params, media, false)
}

// responseMedia sets the response's Content-Type to the media type the
// request accepts (application/json when it accepts neither; the request
// gate has answered 406 to such requests already) and returns it.
func responseMedia(w http.ResponseWriter, r *http.Request) string {
	media, ok := graphQLResponseMedia(r)
	if !ok {
		media = mediaJSON
	}
	w.Header().Set("Content-Type", media)
	return media
}

// executeGraphQL runs one GraphQL-over-HTTP request and writes its response
// in media. A request that cannot be executed (no query, a document that
// does not parse or validate, variables that do not coerce, an operation
// over the depth or complexity limit) is a request error: its response has
// no data entry and answers 400 in application/graphql-response+json and
// 200 in application/json, as the GraphQL-over-HTTP specification asks;
// a missing query is a malformed request and answers 400 in both. With
// queryOnly (GET), operations other than queries answer 405; a
// subscription, which needs a stream, answers 406.
func executeGraphQL(ctx context.Context, w http.ResponseWriter, exec graphql.GraphExecutor, params *graphql.RawParams, media string, queryOnly bool) {
	if params.Query == "" && params.Extensions["persistedQuery"] == nil {
		w.WriteHeader(http.StatusBadRequest)
		writeRequestError(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("a GraphQL request needs a query")}))
		return
	}
	rc, opErr := exec.CreateOperationContext(ctx, params)
	if opErr != nil {
		if media == mediaGraphQLResponse {
			w.WriteHeader(http.StatusBadRequest)
		}
		writeRequestError(w, exec.DispatchError(graphql.WithOperationContext(ctx, rc), opErr))
		return
	}
	if queryOnly && rc.Operation.Operation != ast.Query {
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		writeRequestError(w, exec.DispatchError(graphql.WithOperationContext(ctx, rc), gqlerror.List{gqlerror.Errorf("GET requests only allow query operations; use POST")}))
		return
	}
	if rc.Operation.Operation == ast.Subscription {
		// A subscription has no single response: without a stream it would
		// wait for its first event, holding a request no limit counts.
		w.WriteHeader(http.StatusNotAcceptable)
		writeRequestError(w, exec.DispatchError(graphql.WithOperationContext(ctx, rc), gqlerror.List{gqlerror.Errorf(
			"subscriptions are answered as streams: accept text/event-stream (graphql-sse) or use a WebSocket (graphql-transport-ws)")}))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	writeGraphQLResponse(w, responses(ctx))
}

// writeRequestError writes the response to a request error: its errors
// (and extensions), without a data entry, since nothing was executed.
func writeRequestError(w http.ResponseWriter, resp *graphql.Response) {
	b, err := json.Marshal(struct {
		Errors     gqlerror.List  `json:"errors"`
		Extensions map[string]any `json:"extensions,omitempty"`
	}{resp.Errors, resp.Extensions})
	if err != nil {
		_, _ = w.Write([]byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}`))
		return
	}
	_, _ = w.Write(b)
}

// writeGraphQLResponse writes resp; a response of data alone is written
// without re-encoding its (already encoded) data.
func writeGraphQLResponse(w http.ResponseWriter, resp *graphql.Response) {
	if len(resp.Errors) == 0 && len(resp.Extensions) == 0 && resp.Label == "" && resp.Path == nil && resp.HasNext == nil && len(resp.Data) > 0 {
		_, _ = w.Write([]byte(`{"data":`))
		_, _ = w.Write(resp.Data)
		_, _ = w.Write([]byte("}"))
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}`))
		return
	}
	_, _ = w.Write(b)
}
