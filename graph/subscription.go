package graph

import (
	"context"
	"errors"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// pump moves a stream's events into the channel gqlgen reads a subscription
// from, one at a time: a subscriber that does not read holds only itself
// back. The channel closes, ending the subscription, when ctx ends or the
// stream fails; the stream is closed with it.
func (r *Resolver) pump(ctx context.Context, stream app.AuditEventStream) <-chan *domain.AuditEvent {
	ch := make(chan *domain.AuditEvent)
	go func() {
		defer close(ch)
		defer stream.Close()
		for {
			e, err := stream.Next(ctx)
			if err != nil {
				if ctx.Err() == nil && r.Logger != nil && !errors.Is(err, context.Canceled) {
					r.Logger.WarnContext(ctx, "audit event subscription ended", "err", err)
				}
				return
			}
			select {
			case ch <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
