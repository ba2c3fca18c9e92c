package server

import (
	"encoding/json"
	"mime"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	gojson "github.com/goccy/go-json"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// jsonPOST is the GraphQL-over-HTTP POST transport (application/json). It
// behaves as gqlgen's own, except that it writes the executor's response
// data as produced instead of re-encoding it, which on large pages costs as
// much as producing it.
type jsonPOST struct{}

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
func (jsonPOST) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "application/json")
	start := graphql.Now()
	var params graphql.RawParams
	dec := gojson.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&params); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeGraphQLResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("request body is not valid GraphQL-over-HTTP JSON")}))
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}

	rc, opErr := exec.CreateOperationContext(ctx, &params)
	if opErr != nil {
		if errcode.GetErrorKind(opErr) == errcode.KindProtocol {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		writeGraphQLResponse(w, exec.DispatchError(graphql.WithOperationContext(ctx, rc), opErr))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	writeGraphQLResponse(w, responses(ctx))
}

// writeGraphQLResponse writes resp; a response of data alone is written
// without re-encoding its (already encoded) data.
func writeGraphQLResponse(w http.ResponseWriter, resp *graphql.Response) {
	if len(resp.Errors) == 0 && resp.Extensions == nil && resp.Label == "" && resp.Path == nil && resp.HasNext == nil && len(resp.Data) > 0 {
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
