package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	gojson "github.com/goccy/go-json"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// jsonGET is the GraphQL-over-HTTP GET transport: the request's parameters
// in the URL query (variables and extensions as JSON), queries only. It
// negotiates the response media type and answers request errors like
// jsonPOST.
type jsonGET struct{}

var _ graphql.Transport = jsonGET{}

// Supports implements graphql.Transport.
func (jsonGET) Supports(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") == ""
}

// Do implements graphql.Transport.
func (jsonGET) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	media := responseMedia(w, r)
	start := graphql.Now()
	fail := func(msg string) {
		w.WriteHeader(http.StatusBadRequest)
		writeRequestError(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("%s", msg)}))
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail("the URL query is malformed")
		return
	}
	params := graphql.RawParams{Query: query.Get("query"), OperationName: query.Get("operationName"), Headers: r.Header}
	if v := query.Get("variables"); v != "" {
		if err := decodeJSONParam(v, &params.Variables); err != nil {
			fail("variables is not a JSON object")
			return
		}
	}
	if v := query.Get("extensions"); v != "" {
		if err := decodeJSONParam(v, &params.Extensions); err != nil {
			fail("extensions is not a JSON object")
			return
		}
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	executeGraphQL(ctx, w, exec, &params, media, true)
}

// decodeJSONParam decodes a JSON object (or null) of a URL parameter into v,
// keeping numbers as json.Number like the POST transport.
func decodeJSONParam(s string, v *map[string]any) error {
	dec := gojson.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	return dec.Decode(v)
}
