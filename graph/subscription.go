package graph

import (
	"context"
	"errors"

	"github.com/aetheriot/aether-audit/app"
)

// stream is what pump reads: app.AuditEventStream, *app.DataExportStream,
// *app.ChainVerificationStream.
type stream[T any] interface {
	Next(ctx context.Context) (*T, error)
	Close()
}

// pump moves a stream's values into the channel gqlgen reads a subscription
// from, one at a time: a subscriber that does not read holds only itself
// back. The channel closes, ending the subscription, when ctx ends or the
// stream ends or fails; the stream is closed with it.
func pump[T any](r *Resolver, ctx context.Context, s stream[T]) <-chan *T {
	ch := make(chan *T)
	go func() {
		defer close(ch)
		defer s.Close()
		for {
			v, err := s.Next(ctx)
			if err != nil {
				if ctx.Err() == nil && r.Logger != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, app.ErrStreamEnded) {
					r.Logger.WarnContext(ctx, "subscription ended", "err", err)
				}
				return
			}
			select {
			case ch <- v:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
