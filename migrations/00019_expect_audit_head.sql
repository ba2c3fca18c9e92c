-- +goose Up

-- The head lock of an append whose head the process already knows
-- (store.Tx.ExpectAuditHead): it locks the project's head, like
-- LockAuditHead, and fails with serialization_failure unless the head is
-- still at p_sequence with p_hash and whether the project has an active
-- webhook subscription is still p_webhooks. It returns nothing, so it can
-- travel in the batch of the append's INSERT, head UPDATE, notification
-- and COMMIT: one round trip for the whole append, whose chain hashes were
-- computed from that head before it was sent. When the head moved (another
-- process appended, a command recorded its event), the failure aborts the
-- transaction before anything of it is written, and the append runs again
-- with LockAuditHead. It runs with the caller's rights (the runtime role
-- may lock and read heads and read subscriptions).
-- +goose StatementBegin
CREATE FUNCTION aether_expect_audit_head(p_tenant text, p_project text, p_sequence bigint, p_hash bytea, p_webhooks boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM audit_project_heads h
    WHERE h.tenant_id = p_tenant AND h.project_id = p_project
        AND h.last_sequence = p_sequence AND h.last_hash = p_hash
        AND EXISTS (SELECT 1 FROM webhook_subscriptions w
            WHERE w.tenant_id = h.tenant_id AND w.project_id = h.project_id AND w.state = 'ACTIVE') = p_webhooks
    FOR UPDATE OF h;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the audit head of this project moved'
            USING ERRCODE = 'serialization_failure';
    END IF;
END
$$;
-- +goose StatementEnd

-- Only the runtime role gets to call it (store.GrantAppRole grants it).
REVOKE ALL ON FUNCTION aether_expect_audit_head(text, text, bigint, bytea, boolean) FROM PUBLIC;

-- +goose Down
DROP FUNCTION aether_expect_audit_head(text, text, bigint, bytea, boolean);
