-- name: StreamTelemetryHistory :many
-- Streamed row by row by StreamTelemetryHistory (not through this
-- function): positional parameters. Every column in table order: sqlc gives
-- it dbsqlc.TelemetryHistory.
SELECT tenant_id, project_id, device_id, metric, occurred_at, value, unit
FROM telemetry_history WHERE tenant_id = $1 AND project_id = $2 AND occurred_at >= $3 AND occurred_at < $4
ORDER BY occurred_at, device_id, metric;
