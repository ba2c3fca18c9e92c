package mcpserver

import (
	"net/url"
	"strconv"

	"github.com/yosida95/uritemplate/v3"
)

// The resource URI templates.
const (
	// EventsTemplate is a project's events: the latest page, or with
	// ?after=S the page after sequence S.
	EventsTemplate = "aether://{tenant}/{project}/events{?after}"
	// EventTemplate is one event of a project, by sequence.
	EventTemplate = "aether://{tenant}/{project}/events/{sequence}"
)

var (
	eventsTemplate = uritemplate.MustNew(EventsTemplate)
	eventTemplate  = uritemplate.MustNew(EventTemplate)
)

// resourceURI is a parsed resource URI.
type resourceURI struct {
	tenant, project string
	// after is the ?after=S of an events URI.
	after *uint64
	// sequence is set for an event URI.
	sequence *uint64
}

// parseResourceURI reads an events or event URI; ok is false for anything
// else, a malformed sequence included.
func parseResourceURI(uri string) (r resourceURI, ok bool) {
	if m := eventTemplate.Match(uri); m != nil {
		seq, err := strconv.ParseUint(m.Get("sequence").String(), 10, 64)
		if err != nil {
			return r, false
		}
		r.tenant, r.project, r.sequence = m.Get("tenant").String(), m.Get("project").String(), &seq
	} else if m := eventsTemplate.Match(uri); m != nil {
		r.tenant, r.project = m.Get("tenant").String(), m.Get("project").String()
		if a := m.Get("after"); a.Valid() {
			after, err := strconv.ParseUint(a.String(), 10, 64)
			if err != nil {
				return r, false
			}
			r.after = &after
		}
	} else {
		return r, false
	}
	return r, r.tenant != "" && r.project != ""
}

// EventsURI is the URI of a project's events; after, when set, adds
// ?after=S.
func EventsURI(tenant, project string, after *uint64) string {
	u := "aether://" + url.PathEscape(tenant) + "/" + url.PathEscape(project) + "/events"
	if after != nil {
		u += "?after=" + strconv.FormatUint(*after, 10)
	}
	return u
}

// EventURI is the URI of the event at seq of a project.
func EventURI(tenant, project string, seq uint64) string {
	return "aether://" + url.PathEscape(tenant) + "/" + url.PathEscape(project) + "/events/" + strconv.FormatUint(seq, 10)
}
