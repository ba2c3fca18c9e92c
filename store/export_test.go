package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aetheriot/aether-audit/domain"
)

// RowToUUID is rowToUUID, for the external tests.
var RowToUUID = rowToUUID

// StartAttemptsSQL and RecordSuccessesSQL are SaveWebhookDeliveriesIf's
// statements for uniform batches, for the external tests.
const StartAttemptsSQL, RecordSuccessesSQL = startAttempts, recordSuccesses

// IDBounds is idBounds, for the external tests.
var IDBounds = idBounds

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
		return pgx.CollectRows(rows, newEventBatchScanner(textInterner{}, 8).scan)
	}
	return pgx.CollectRows(rows, scanAuditEvent)
}

// ArrayParams returns ids, texts, times and ints as the array parameters
// of array_params.go (params) or as pgx's own slices (ids as [16]byte
// values, which encode on a pool without the uuid package's codec).
func ArrayParams(ids []uuid.UUID, texts []string, times []time.Time, ints []pgtype.Int8, params bool) []any {
	if params {
		return []any{uuidParams(ids), textParams(texts), timeParams(times), nullIntParams(ints)}
	}
	var raw [][16]byte
	if ids != nil {
		raw = make([][16]byte, len(ids))
		for i, id := range ids {
			raw[i] = id
		}
	}
	return []any{raw, texts, times, ints}
}

// TxQueryRow runs sql in tx, for the external tests.
func TxQueryRow(ctx context.Context, tx *Tx, sql string, args ...any) pgx.Row {
	return tx.db.QueryRow(ctx, sql, args...)
}
