package app

import (
	"context"

	"github.com/aetheriot/aether-audit/domain"
)

// CheckpointReads reads signed checkpoints: on the Store each read runs
// alone, on a Tx in its transaction.
type CheckpointReads interface {
	GetAuditCheckpoint(ctx context.Context, tenantID, projectID string, seq uint64) (domain.AuditCheckpoint, error)
	LatestIssuedAuditCheckpoint(ctx context.Context, tenantID, projectID string) (domain.AuditCheckpoint, error)
	AuditCheckpointAtOrBelow(ctx context.Context, tenantID, projectID string, seq uint64) (domain.AuditCheckpoint, error)
	ListAuditCheckpoints(ctx context.Context, tenantID, projectID string, after uint64, limit int) ([]domain.AuditCheckpoint, error)
	AuditCheckpointsInRange(ctx context.Context, tenantID, projectID string, from, to uint64, limit int) ([]domain.StoredCheckpoint, error)
	AuditCheckpointCandidates(ctx context.Context, afterTenant, afterProject string, limit int) ([]domain.CheckpointCandidate, error)
}

// CheckpointTx is what signing does in a transaction.
type CheckpointTx interface {
	CheckpointReads
	// InsertAuditCheckpoint stores a new checkpoint; one of the same
	// sequence or issue number stored concurrently makes it fail with a
	// retryable unique violation.
	InsertAuditCheckpoint(ctx context.Context, c domain.AuditCheckpoint) error
}

// CheckpointKeys returns the public keys that verify checkpoints (the
// signing key's and the retired ones) as a JWKS, what
// GET /.well-known/aether/checkpoint-keys serves; {"keys":[]} when no key is
// configured.
func (a *App) CheckpointKeys() []byte {
	if a.checkpoints == nil {
		return []byte(`{"keys":[]}`)
	}
	return a.checkpoints.JWKS()
}

// errNoCheckpointKey refuses to sign without a configured key.
var errNoCheckpointKey = newError(CodeInvalidState, "checkpoints are off: the service has no checkpoint key configured")
