package server

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// The media types of GraphQL-over-HTTP responses.
const (
	// mediaGraphQLResponse is the GraphQL-over-HTTP response type: request
	// errors (unparsable or invalid documents, bad variables) answer 400
	// without a data entry.
	mediaGraphQLResponse = "application/graphql-response+json"
	// mediaJSON is the legacy type: every well-formed request answers 200.
	mediaJSON = "application/json"
)

// graphQLResponseMedia chooses the media type of a GraphQL response from the
// request's Accept header, as the GraphQL-over-HTTP specification asks: no
// Accept (or one allowing any application type) means application/json;
// application/graphql-response+json is chosen when the client names it at
// least as preferred as application/json. It reports false when the client
// accepts neither (406).
func graphQLResponseMedia(r *http.Request) (string, bool) {
	accept := strings.Join(r.Header.Values("Accept"), ",")
	if strings.TrimSpace(accept) == "" {
		return mediaJSON, true
	}
	// q of the media range naming each type exactly (-1: not named) and of
	// the most preferred wildcard range (-1: none); a named range overrides
	// the wildcards, as in RFC 9110 section 12.5.1.
	namedGQL, namedJSON, wildcard := -1.0, -1.0, -1.0
	for part := range strings.SplitSeq(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			continue // we answer in UTF-8 only
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(s, 64); err != nil || q < 0 || q > 1 {
				continue
			}
		}
		switch mediaType {
		case mediaGraphQLResponse:
			namedGQL = max(namedGQL, q)
		case mediaJSON:
			namedJSON = max(namedJSON, q)
		case "application/*", "*/*":
			wildcard = max(wildcard, q)
		}
	}
	qJSON := namedJSON
	if qJSON < 0 {
		qJSON = wildcard
	}
	switch {
	case namedGQL > 0 && namedGQL >= qJSON:
		return mediaGraphQLResponse, true
	case qJSON > 0:
		return mediaJSON, true
	case namedGQL < 0 && wildcard > 0:
		// application/json refused by name, but a wildcard allows the other.
		return mediaGraphQLResponse, true
	}
	return "", false
}
