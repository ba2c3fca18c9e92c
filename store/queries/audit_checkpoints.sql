-- name: InsertAuditCheckpoint :exec
-- A new checkpoint. A concurrent signer of the same project that took the
-- same sequence or issue number fails with a unique violation, and its
-- transaction is retried (it then finds this one).
INSERT INTO audit_checkpoints (tenant_id, project_id, sequence, issue_number, chain_hash, purged_through,
    anchor_hash, previous_checkpoint, jws_digest, key_id, jws, issued_at)
VALUES (@tenant_id, @project_id, @sequence, @issue_number, @chain_hash, @purged_through,
    @anchor_hash, @previous_checkpoint, @jws_digest, @key_id, @jws, @issued_at);

-- name: GetAuditCheckpoint :one
-- The project's checkpoint at this sequence.
SELECT tenant_id, project_id, sequence, issue_number, chain_hash, purged_through, anchor_hash,
    previous_checkpoint, jws_digest, key_id, jws, issued_at
FROM audit_checkpoints
WHERE tenant_id = @tenant_id AND project_id = @project_id AND sequence = @sequence;

-- name: LatestIssuedAuditCheckpoint :one
-- The project's checkpoint issued last, which the next one links to.
SELECT tenant_id, project_id, sequence, issue_number, chain_hash, purged_through, anchor_hash,
    previous_checkpoint, jws_digest, key_id, jws, issued_at
FROM audit_checkpoints
WHERE tenant_id = @tenant_id AND project_id = @project_id
ORDER BY issue_number DESC LIMIT 1;

-- name: AuditCheckpointAtOrBelow :one
-- The project's checkpoint with the highest sequence at or below this one:
-- where a signer's recomputation of the chain starts.
SELECT tenant_id, project_id, sequence, issue_number, chain_hash, purged_through, anchor_hash,
    previous_checkpoint, jws_digest, key_id, jws, issued_at
FROM audit_checkpoints
WHERE tenant_id = @tenant_id AND project_id = @project_id AND sequence <= @sequence
ORDER BY sequence DESC LIMIT 1;

-- name: ListAuditCheckpoints :many
-- A page of the project's checkpoints by sequence, after after_sequence.
SELECT tenant_id, project_id, sequence, issue_number, chain_hash, purged_through, anchor_hash,
    previous_checkpoint, jws_digest, key_id, jws, issued_at
FROM audit_checkpoints
WHERE tenant_id = @tenant_id AND project_id = @project_id AND sequence > @after_sequence
ORDER BY sequence LIMIT @row_limit::bigint;

-- name: AuditCheckpointsInRange :many
-- The project's checkpoints with sequence in [from_sequence, to_sequence],
-- by sequence, each with the JWS of the checkpoint issued just before it
-- (NULL for the first, or when that one is missing), for verifyAuditChain.
SELECT c.sequence, c.issue_number, c.jws, p.jws AS previous_jws
FROM audit_checkpoints c
LEFT JOIN audit_checkpoints p ON p.tenant_id = c.tenant_id AND p.project_id = c.project_id
    AND p.issue_number = c.issue_number - 1
WHERE c.tenant_id = @tenant_id AND c.project_id = @project_id
    AND c.sequence BETWEEN @from_sequence AND @to_sequence
ORDER BY c.sequence LIMIT @row_limit::bigint;

-- name: AuditCheckpointCandidates :many
-- Projects (after the given one, in key order) whose head is past their
-- highest checkpoint and their purged prefix: what the periodic signer
-- signs.
SELECT h.tenant_id, h.project_id, h.last_sequence
FROM audit_project_heads h
WHERE (h.tenant_id, h.project_id) > (@after_tenant::text, @after_project::text)
    AND h.last_sequence > h.purged_through
    AND h.last_sequence > COALESCE((SELECT max(c.sequence) FROM audit_checkpoints c
        WHERE c.tenant_id = h.tenant_id AND c.project_id = h.project_id), 0)
ORDER BY h.tenant_id, h.project_id LIMIT @row_limit::bigint;
