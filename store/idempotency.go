package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
)

// ClaimIdempotencyKey claims (tenant, operation, key) for this transaction.
// When the claim is new it returns found=false: the caller performs the
// mutation and calls CompleteIdempotencyKey before committing. When the key
// was already used it returns found=true with the fingerprint of the request
// it was first used with and that request's stored result; a concurrent claim of the same key waits for
// the first transaction and then sees its committed record.
func (t *Tx) ClaimIdempotencyKey(ctx context.Context, tenantID, operation, key string, fingerprint domain.Hash, ttl time.Duration) (prior domain.Hash, result []byte, found bool, err error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO idempotency_keys (tenant_id, operation, key, fingerprint, result, expires_at)
		VALUES ($1, $2, $3, $4, 'null', now() + $5::interval)
		ON CONFLICT (tenant_id, operation, key) DO NOTHING`,
		tenantID, operation, key, fingerprint[:], ttl)
	if err != nil {
		return prior, nil, false, fmt.Errorf("claiming idempotency key: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return prior, nil, false, nil
	}
	var fp []byte
	err = t.tx.QueryRow(ctx, `SELECT fingerprint, result FROM idempotency_keys
		WHERE tenant_id = $1 AND operation = $2 AND key = $3`, tenantID, operation, key).Scan(&fp, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		// The other claim rolled back or was pruned between our statements:
		// the caller retries the whole transaction.
		return prior, nil, false, fmt.Errorf("idempotency key vanished during claim: %w", errRetry)
	}
	if err != nil {
		return prior, nil, false, fmt.Errorf("reading idempotency key: %w", err)
	}
	copy(prior[:], fp)
	return prior, result, true, nil
}

// CompleteIdempotencyKey stores the result of the mutation that claimed the
// key in this transaction.
func (t *Tx) CompleteIdempotencyKey(ctx context.Context, tenantID, operation, key string, result []byte) error {
	if _, err := t.tx.Exec(ctx, `UPDATE idempotency_keys SET result = $4
		WHERE tenant_id = $1 AND operation = $2 AND key = $3`, tenantID, operation, key, result); err != nil {
		return fmt.Errorf("completing idempotency key: %w", err)
	}
	return nil
}

// PruneIdempotencyKeys deletes up to limit records past their expiry and
// returns how many it deleted.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT $1))`, limit)
	if err != nil {
		return 0, fmt.Errorf("pruning idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

// errRetry marks a conflict that a fresh attempt of the transaction resolves.
var errRetry = errors.New("transient conflict")
