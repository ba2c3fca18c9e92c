package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// claimIdempotency claims an idempotency key for operation op in the
// transaction tx. For a new key it returns found=false: the caller
// performs the command and records its result. For a key used before with
// the same request fingerprint it returns found=true and that result; with
// another fingerprint it fails with IDEMPOTENCY_CONFLICT.
func (a *App) claimIdempotency(ctx context.Context, tx Tx, tenantID, op, key string, fp domain.Hash) (result []byte, found bool, err error) {
	prior, result, found, err := tx.ClaimIdempotencyKey(ctx, tenantID, op, key, fp, a.idempotencyTTL)
	if err != nil || !found {
		return nil, false, err
	}
	if prior != fp {
		return nil, false, &Error{Code: CodeIdempotencyConflict, Field: "idempotencyKey",
			Message: "idempotency key was already used with a different request"}
	}
	return result, true, nil
}

// claimIdempotentID is claimIdempotency for commands whose result is the id
// of what they created: it returns that id on a replay, and records id as
// the result of a new claim.
func (a *App) claimIdempotentID(ctx context.Context, tx Tx, tenantID, op, key string, fp domain.Hash, id uuid.UUID) (prior uuid.UUID, found bool, err error) {
	result, found, err := a.claimIdempotency(ctx, tx, tenantID, op, key, fp)
	if err != nil {
		return uuid.Nil, false, err
	}
	if found {
		if err := json.Unmarshal(result, &prior); err != nil {
			return uuid.Nil, false, fmt.Errorf("decoding idempotency result: %w", err)
		}
		return prior, true, nil
	}
	b, _ := json.Marshal(id)
	return uuid.Nil, false, tx.CompleteIdempotencyKey(ctx, tenantID, op, key, b)
}

// checkIdempotencyKey checks an optional idempotencyKey.
func checkIdempotencyKey(key string) error {
	return domain.ValidateText("idempotencyKey", key, MaxIdempotencyKeyLength, false, true)
}

// MaxIdempotencyKeyLength bounds idempotency keys, in bytes.
const MaxIdempotencyKeyLength = 255
