package app

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
)

// WriteCheckpointObject writes a stored checkpoint's JWS to object storage
// at export.CheckpointKey (the outbox job committed with the checkpoint). An object already there
// with the same bytes is fine; the object is never overwritten.
func (a *App) WriteCheckpointObject(ctx context.Context, tenantID, projectID string, seq uint64) error {
	if a.exports.Bucket == nil {
		return errors.New("checkpoints: no object storage configured")
	}
	c, err := a.store.GetAuditCheckpoint(ctx, tenantID, projectID, seq)
	if errors.Is(err, domain.ErrNotFound) {
		return nil // cannot happen: checkpoints are never deleted
	}
	if err != nil {
		return err
	}
	key := export.CheckpointKey(tenantID, projectID, seq)
	if have, err := a.exports.Bucket.ReadAll(ctx, key); err == nil {
		if string(have) != c.JWS {
			return fmt.Errorf("checkpoint object %s exists with other content", key)
		}
		return nil
	} else if !isBlobNotFound(err) {
		return fmt.Errorf("reading checkpoint object: %w", err)
	}
	err = a.exports.Bucket.WriteAll(ctx, key, []byte(c.JWS), &blob.WriterOptions{ContentType: "application/jose"})
	if err != nil {
		return fmt.Errorf("writing checkpoint object: %w", err)
	}
	return nil
}
