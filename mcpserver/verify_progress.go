package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// VerifyProgress is one progress item of a verify_audit_chain call: how far
// the verification of its range has come.
type VerifyProgress struct {
	// CheckedCount is how many events were recomputed so far (across the
	// calls of a resumed verification).
	CheckedCount uint64
	// SequenceReached is the sequence the range is verified through.
	SequenceReached uint64
	// HeadSequence is the project's head when the verification started.
	HeadSequence uint64
	// EventsPerSecond is the server's rate since the verification started.
	EventsPerSecond float64
}

// progressFunc receives each progress item of a long tool call.
type progressFunc func(VerifyProgress)

// verifyProgressNotifier reports each progress item of the verification of
// in as an MCP progress notification of req, when its client asked for
// them (a progressToken); nil otherwise. Progress is the events checked,
// Total the events of the whole range (those checked, and those left
// through toSequence or the head). A notification that cannot be sent
// (the client went away) is dropped: the call's context ends the work.
func verifyProgressNotifier(ctx context.Context, req *mcp.CallToolRequest, in VerifyAuditChainInput) progressFunc {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	return func(p VerifyProgress) {
		last := p.HeadSequence
		if in.ToSequence != nil {
			last = min(last, uint64(*in.ToSequence))
		}
		total := p.CheckedCount
		if last > p.SequenceReached {
			total += last - p.SequenceReached
		}
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(p.CheckedCount),
			Total:         float64(total),
			Message: fmt.Sprintf("verified through sequence %d of %d (%d events checked, %.0f events/s)",
				p.SequenceReached, last, p.CheckedCount, p.EventsPerSecond),
		})
	}
}
