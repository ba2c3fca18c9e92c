package app

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// operationalSubject is the subject of the events the service records about
// its own work (domain.OperationalActions): a SYSTEM subject.
const operationalSubject = domain.SystemSubjectPrefix + "aether"

// recordOperationalEvent appends one of the service's own events
// (domain.OperationalActions) to a project's chain, in tx, the transaction
// of the change it reports: a SYSTEM subject, recorded by the service. It
// flows like any event: live feed, webhooks, queries and exports.
func (a *App) recordOperationalEvent(ctx context.Context, tx Tx, tenantID, projectID, action string, resource domain.Resource, risk domain.Risk, details string, now time.Time) error {
	id := Identity{TenantID: tenantID, Subject: operationalSubject, ProjectIDs: []string{projectID}}
	_, err := a.recordCommandEvent(ctx, tx, id, projectID, action, resource, risk, details, now)
	return err
}

// recordExportOutcome records, in tx, the operational event of an export
// that just became READY (export.ready) or FAILED (export.failed); other
// states record nothing. The event never holds the object's location.
func (a *App) recordExportOutcome(ctx context.Context, tx Tx, e domain.DataExport, now time.Time) error {
	var (
		action  string
		details map[string]any
	)
	switch e.State {
	case domain.DataExportReady:
		action = "export.ready"
		details = map[string]any{"exportId": e.ID.String(), "kind": e.Kind, "rowCount": e.RowCount,
			"byteLength": e.ByteLength, "contentDigest": e.ContentDigest}
	case domain.DataExportFailed:
		action = "export.failed"
		details = map[string]any{"exportId": e.ID.String(), "kind": e.Kind, "reason": e.FailureReason}
	default:
		return nil
	}
	b, _ := json.Marshal(details)
	return a.recordOperationalEvent(ctx, tx, e.TenantID, e.ProjectID, action,
		domain.Resource{Type: "data_export", ID: e.ID.String()}, domain.RiskLow, string(b), now)
}
