-- name: StreamAlarmHistory :many
-- Streamed row by row by StreamAlarmHistory (not through this function):
-- positional parameters.
SELECT tenant_id, project_id, id, occurred_at, alarm_id, device_id, severity, state,
    message, details::text AS details
FROM alarm_history WHERE tenant_id = $1 AND project_id = $2 AND occurred_at >= $3 AND occurred_at < $4
ORDER BY occurred_at, id;
