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
	// mediaEventStream is the graphql-sse (distinct connections mode)
	// response type.
	mediaEventStream = "text/event-stream"
)

// mediaRange is one element of an Accept header (RFC 9110 section 12.5.1).
type mediaRange struct {
	// mediaType is lower-cased: "type/subtype", "type/*" or "*/*".
	mediaType string
	params    map[string]string
	q         float64
	// pos is the element's position in the header, from 0.
	pos int
}

// acceptRanges parses the request's Accept headers; elements that do not
// parse, or whose q is not a number between 0 and 1, are left out. It
// reports false when the request has no Accept header (anything goes).
func acceptRanges(r *http.Request) ([]mediaRange, bool) {
	accept := strings.Join(r.Header.Values("Accept"), ",")
	if strings.TrimSpace(accept) == "" {
		return nil, false
	}
	var ranges []mediaRange
	pos := 0
	for part := range strings.SplitSeq(accept, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(s, 64); err != nil || q < 0 || q > 1 {
				continue
			}
		}
		ranges = append(ranges, mediaRange{mediaType: mediaType, params: params, q: q, pos: pos})
		pos++
	}
	return ranges, true
}

// acceptance is how a request's Accept header rates one media type: the q
// of the most specific range that matches it and that range's position.
type acceptance struct {
	q   float64
	pos int
	// named reports that the range names the type itself (no wildcard).
	named bool
}

// acceptable reports whether the type may be sent at all.
func (a acceptance) acceptable() bool { return a.q > 0 }

// preferredTo reports whether a ranks above b: a higher q, or the same q
// from a range listed earlier.
func (a acceptance) preferredTo(b acceptance) bool {
	if !a.acceptable() {
		return false
	}
	if !b.acceptable() || a.q != b.q {
		return a.q > b.q
	}
	return a.pos < b.pos
}

// rate finds how ranges accept mediaType. A range naming the type wins
// over "type/*", which wins over "*/*"; among equally specific ranges the
// highest q wins. With utf8Only, ranges asking for another charset do not
// match (we answer in UTF-8 only). A type no range matches has q 0.
func rate(ranges []mediaRange, mediaType string, utf8Only bool) acceptance {
	major, _, _ := strings.Cut(mediaType, "/")
	best, bestRank := acceptance{pos: -1}, 0
	for _, mr := range ranges {
		rank := 0
		switch mr.mediaType {
		case mediaType:
			rank = 3
		case major + "/*":
			rank = 2
		case "*/*":
			rank = 1
		default:
			continue
		}
		if cs, ok := mr.params["charset"]; ok && utf8Only && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			continue
		}
		if rank > bestRank || (rank == bestRank && mr.q > best.q) {
			best, bestRank = acceptance{q: mr.q, pos: mr.pos, named: rank == 3}, rank
		}
	}
	return best
}

// graphQLResponseMedia chooses the media type of a GraphQL response from the
// request's Accept header, as the GraphQL-over-HTTP specification asks: no
// Accept (or one allowing any application type) means application/json;
// application/graphql-response+json is chosen when the client names it at
// least as preferred as application/json. It reports false when the client
// accepts neither (406).
func graphQLResponseMedia(r *http.Request) (string, bool) {
	ranges, ok := acceptRanges(r)
	if !ok {
		return mediaJSON, true
	}
	gql, json := rate(ranges, mediaGraphQLResponse, true), rate(ranges, mediaJSON, true)
	switch {
	case gql.named && gql.acceptable() && gql.q >= json.q:
		return mediaGraphQLResponse, true
	case json.acceptable():
		return mediaJSON, true
	case gql.acceptable():
		// application/json refused, but a wildcard allows the other.
		return mediaGraphQLResponse, true
	}
	return "", false
}

// eventStreamWanted decides whether a GraphQL POST is answered as a
// graphql-sse stream (text/event-stream) rather than as one JSON response,
// by the request's Accept header as RFC 9110 ranks it:
//
//   - only a range naming text/event-stream asks for a stream (a wildcard
//     such as curl's "*/*" never does);
//   - a stream is chosen when text/event-stream ranks above every JSON type
//     the request accepts (a higher q, or the same q listed earlier), as
//     graphql-sse's client asks with "Accept: text/event-stream";
//   - otherwise a stream is chosen only when the operation is a
//     subscription, which has no single response; isSubscription is asked
//     only then.
//
// So urql's default "application/graphql-response+json, …,
// text/event-stream, multipart/mixed" gets JSON for queries and mutations
// and a stream for subscriptions.
func eventStreamWanted(r *http.Request, isSubscription func() bool) bool {
	ranges, ok := acceptRanges(r)
	if !ok {
		return false
	}
	sse := rate(ranges, mediaEventStream, false)
	if !sse.named || !sse.acceptable() {
		return false
	}
	gql, json := rate(ranges, mediaGraphQLResponse, true), rate(ranges, mediaJSON, true)
	if sse.preferredTo(gql) && sse.preferredTo(json) {
		return true
	}
	return isSubscription()
}
