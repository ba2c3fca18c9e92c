package domain

import (
	"slices"
	"strings"
)

// ReservedActionNamespaces are the first segments of the actions only the
// service records: a client's event may not use them.
var ReservedActionNamespaces = []string{"audit", "export", "retention", "webhook"}

// SystemSubjectPrefix starts the subject ids of the service's own
// identities ("system:retention"). Clients may not record such a subject.
const SystemSubjectPrefix = "system:"

// ServiceActions lists every action the service records itself, each in a
// reserved namespace. Recording a command's event with an action missing
// here fails, so a new command cannot ship without joining the table (and
// docs/api.md, which lists it).
var ServiceActions = []string{
	"audit.events.purged",
	"audit.retention.updated",
	"audit.stream.created",
	"audit.stream.deleted",
	"audit.stream.paused",
	"audit.stream.resumed",
	"audit.stream.updated",
	"export.download_created",
	"export.expired",
	"export.requested",
	"webhook.deliveries.recovered",
	"webhook.delivery.redriven",
	"webhook.delivery.skipped",
	"webhook.destination.created",
	"webhook.destination.secret_rotated",
	"webhook.destination.test_sent",
	"webhook.events.replayed",
	"webhook.subscription.created",
	"webhook.subscription.disabled",
	"webhook.destination.updated",
	"webhook.destination.disabled",
	"webhook.destination.enabled",
	"webhook.destination.deleted",
	// OperationalActions.
	"webhook.delivery.dead_lettered",
	"webhook.destination.auto_disabled",
	"webhook.destination.circuit_opened",
	"webhook.destination.circuit_closed",
	"export.ready",
	"export.failed",
	"retention.partitions.dropped",
}

// OperationalActions are the service actions that report the service's own
// work rather than a command: recorded with a SYSTEM subject, in the
// transaction of the change they report.
var OperationalActions = []string{
	"webhook.delivery.dead_lettered",
	"webhook.destination.auto_disabled",
	"webhook.destination.circuit_opened",
	"webhook.destination.circuit_closed",
	"export.ready",
	"export.failed",
	"retention.partitions.dropped",
}

// IsOperationalAction reports whether action is in OperationalActions.
func IsOperationalAction(action string) bool {
	return slices.Contains(OperationalActions, action)
}

// IsServiceAction reports whether action is in ServiceActions.
func IsServiceAction(action string) bool {
	return slices.Contains(ServiceActions, action)
}

// IsReservedAction reports whether action lies in a reserved namespace.
func IsReservedAction(action string) bool {
	ns, _, _ := strings.Cut(action, ".")
	return slices.Contains(ReservedActionNamespaces, ns)
}

// CheckClientWritable refuses what only the service may record: an action in
// a reserved namespace, or a subject id starting with SystemSubjectPrefix
// (whatever its type). path prefixes the field names as in Normalize.
func (d *AuditEventDraft) CheckClientWritable(path string) error {
	f := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	if IsReservedAction(d.Action) {
		ns, _, _ := strings.Cut(d.Action, ".")
		return invalid(f("action"), "uses the reserved namespace %q: the service records those actions itself", ns+".*")
	}
	if strings.HasPrefix(d.Subject.ID, SystemSubjectPrefix) {
		return invalid(f("subject.id"), "must not start with %q: those are the service's own identities", SystemSubjectPrefix)
	}
	return nil
}
