-- name: ClaimIdempotencyKey :execrows
-- Claims the key; no row when it is already taken.
INSERT INTO idempotency_keys (tenant_id, operation, key, fingerprint, result, expires_at)
VALUES (@tenant_id, @operation, @key, @fingerprint, 'null', now() + @ttl::interval)
ON CONFLICT (tenant_id, operation, key) DO NOTHING;

-- name: GetIdempotencyKey :one
SELECT fingerprint, result FROM idempotency_keys
WHERE tenant_id = @tenant_id AND operation = @operation AND key = @key;

-- name: CompleteIdempotencyKey :exec
UPDATE idempotency_keys SET result = @result
WHERE tenant_id = @tenant_id AND operation = @operation AND key = @key;

-- name: PruneIdempotencyKeys :execrows
-- Deletes up to row_limit records past their expiry.
DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT @row_limit::bigint));
