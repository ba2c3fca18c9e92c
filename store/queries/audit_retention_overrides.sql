-- name: GetAuditRetentionOverride :one
SELECT retention_days FROM audit_retention_overrides WHERE tenant_id = @tenant_id;

-- name: DeleteAuditRetentionOverride :exec
DELETE FROM audit_retention_overrides WHERE tenant_id = @tenant_id;

-- name: UpsertAuditRetentionOverride :exec
INSERT INTO audit_retention_overrides (tenant_id, retention_days, updated_at, updated_by)
VALUES (@tenant_id, @retention_days, @updated_at, @updated_by) ON CONFLICT (tenant_id) DO UPDATE
SET retention_days = EXCLUDED.retention_days, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by;
