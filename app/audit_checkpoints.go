package app

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/aetheriot/aether-audit/domain"
)

// AuditCheckpointsInput selects a page of a project's checkpoints.
type AuditCheckpointsInput struct {
	ProjectID string
	First     *int
	// After is the cursor of the last checkpoint of the previous page.
	After string
}

// AuditCheckpoints returns a page of a project's signed checkpoints by
// sequence, oldest first (1-100, default 50). Needs audit:read and the
// project.
func (a *App) AuditCheckpoints(ctx context.Context, id Identity, in AuditCheckpointsInput) (Page[domain.AuditCheckpoint], error) {
	if err := authorize(id, PermissionAuditRead, in.ProjectID); err != nil {
		return Page[domain.AuditCheckpoint]{}, err
	}
	limit, err := pageSize(in.First)
	if err != nil {
		return Page[domain.AuditCheckpoint]{}, err
	}
	var after uint64
	if in.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.After)
		s, ok := strings.CutPrefix(string(raw), checkpointCursorPrefix)
		if err == nil && ok {
			after, err = strconv.ParseUint(s, 10, 63)
		}
		if err != nil || !ok {
			return Page[domain.AuditCheckpoint]{}, badInput("after", "is not a cursor of this list")
		}
	}
	cs, err := a.store.ListAuditCheckpoints(ctx, id.TenantID, in.ProjectID, after, limit+1)
	if err != nil {
		return Page[domain.AuditCheckpoint]{}, err
	}
	return pageOf(cs, limit), nil
}

const checkpointCursorPrefix = "ck1:"

// CheckpointCursor is the opaque cursor of a checkpoint in
// auditCheckpoints (it encodes its sequence).
func CheckpointCursor(c *domain.AuditCheckpoint) string {
	return base64.RawURLEncoding.EncodeToString([]byte(checkpointCursorPrefix + strconv.FormatUint(c.Sequence, 10)))
}
