package store

import (
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
)

// RowToUUID is rowToUUID, for the external tests.
var RowToUUID = rowToUUID

// CollectDeliveries collects rows of dbsqlc.BatchSendWebhookDeliveries
// with the batch read's scanner (batch) or scanDelivery.
func CollectDeliveries(rows pgx.Rows, batch bool) ([]domain.WebhookDelivery, error) {
	if batch {
		return pgx.CollectRows(rows, newDeliveryBatchScanner(textInterner{}).scan)
	}
	return pgx.CollectRows(rows, scanDelivery)
}

// CollectEvents collects rows of dbsqlc.FindAuditEventsByID with the batch
// read's scanner (batch) or scanAuditEvent.
func CollectEvents(rows pgx.Rows, batch bool) ([]domain.AuditEvent, error) {
	if batch {
		return pgx.CollectRows(rows, newEventBatchScanner(textInterner{}).scan)
	}
	return pgx.CollectRows(rows, scanAuditEvent)
}
