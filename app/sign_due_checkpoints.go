package app

import (
	"context"
	"errors"
)

// checkpointCandidatePage is how many projects one read of the periodic
// signer fetches.
const checkpointCandidatePage = 100

// SignDueCheckpoints signs, for each project whose head is past its
// highest checkpoint, a checkpoint at its head (or, after more than
// MaxCheckpointRecompute new events, one that far: the next run goes on),
// linked to the project's previous checkpoint. It looks at no more than
// maxProjects projects and returns how many checkpoints it signed. A
// project whose chain does not recompute is refused (logged and counted)
// and the others are still signed; an error of the database ends the run.
// With no key ring it does nothing.
func (a *App) SignDueCheckpoints(ctx context.Context, maxProjects int) (int, error) {
	if a.checkpoints == nil {
		return 0, nil
	}
	signed, seen := 0, 0
	afterTenant, afterProject := "", ""
	for seen < maxProjects {
		cands, err := a.store.AuditCheckpointCandidates(ctx, afterTenant, afterProject, min(checkpointCandidatePage, maxProjects-seen))
		if err != nil || len(cands) == 0 {
			return signed, err
		}
		for _, c := range cands {
			seen++
			afterTenant, afterProject = c.TenantID, c.ProjectID
			_, err := a.signCheckpoint(ctx, c.TenantID, c.ProjectID, c.HeadSequence, 1)
			var appErr *Error
			switch {
			case err == nil:
				signed++
			case errors.As(err, &appErr) && appErr.Code == CodeInvalidState:
				// Refused (logged and counted), or purged meanwhile: the
				// other projects still get theirs.
			default:
				return signed, err
			}
		}
	}
	return signed, nil
}
