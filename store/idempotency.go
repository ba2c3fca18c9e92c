package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// ClaimIdempotencyKey claims (tenant, operation, key) for this transaction.
// When the claim is new it returns found=false: the caller performs the
// mutation and calls CompleteIdempotencyKey before committing. When the key
// was already used it returns found=true with the fingerprint of the request
// it was first used with and that request's stored result; a concurrent claim of the same key waits for
// the first transaction and then sees its committed record.
func (t *Tx) ClaimIdempotencyKey(ctx context.Context, tenantID, operation, key string, fingerprint domain.Hash, ttl time.Duration) (prior domain.Hash, result []byte, found bool, err error) {
	claimed, err := t.sqlc.ClaimIdempotencyKey(ctx, dbsqlc.ClaimIdempotencyKeyParams{
		TenantID: tenantID, Operation: operation, Key: key, Fingerprint: fingerprint[:], Ttl: ttl})
	if err != nil {
		return prior, nil, false, fmt.Errorf("claiming idempotency key: %w", err)
	}
	if claimed == 1 {
		return prior, nil, false, nil
	}
	row, err := t.sqlc.GetIdempotencyKey(ctx, dbsqlc.GetIdempotencyKeyParams{TenantID: tenantID, Operation: operation, Key: key})
	if errors.Is(err, pgx.ErrNoRows) {
		// The other claim rolled back or was pruned between our statements:
		// the caller retries the whole transaction.
		return prior, nil, false, fmt.Errorf("idempotency key vanished during claim: %w", errRetry)
	}
	if err != nil {
		return prior, nil, false, fmt.Errorf("reading idempotency key: %w", err)
	}
	copy(prior[:], row.Fingerprint)
	return prior, row.Result, true, nil
}

// CompleteIdempotencyKey stores the result of the mutation that claimed the
// key in this transaction.
func (t *Tx) CompleteIdempotencyKey(ctx context.Context, tenantID, operation, key string, result []byte) error {
	if err := t.sqlc.CompleteIdempotencyKey(ctx, dbsqlc.CompleteIdempotencyKeyParams{
		TenantID: tenantID, Operation: operation, Key: key, Result: result}); err != nil {
		return fmt.Errorf("completing idempotency key: %w", err)
	}
	return nil
}

// PruneIdempotencyKeys deletes up to limit records past their expiry and
// returns how many it deleted.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, limit int) (int64, error) {
	n, err := s.sqlc.PruneIdempotencyKeys(ctx, int64(limit))
	if err != nil {
		return 0, fmt.Errorf("pruning idempotency keys: %w", err)
	}
	return n, nil
}

// errRetry marks a conflict that a fresh attempt of the transaction resolves.
var errRetry = errors.New("transient conflict")
