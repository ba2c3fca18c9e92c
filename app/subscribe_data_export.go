package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// DataExportWatcher signals changes of one export; the live hub implements
// it (a notification per change, and a periodic signal in case one is
// lost).
type DataExportWatcher interface {
	// WatchDataExport returns a channel that receives a value (coalesced)
	// after each change of the export, and a func that stops the watch.
	WatchDataExport(tenantID string, exportID uuid.UUID) (<-chan struct{}, func())
}

// DataExportStream yields an export each time its state or progress
// changes.
type DataExportStream struct {
	app    *App
	id     Identity
	export domain.DataExport
	signal <-chan struct{}
	stop   func()
	sent   bool
}

// exportPoll bounds how long a subscription waits without a signal before
// it looks again.
const exportPoll = 5 * time.Second

// SubscribeDataExport watches one export: the stream first yields its
// current state, then every change of state or progress, and ends after
// the export reaches EXPIRED. Needs exports:read; another tenant's or
// project's export is not found.
func (a *App) SubscribeDataExport(ctx context.Context, id Identity, exportID string) (*DataExportStream, error) {
	if err := a.authorizeSubscription(id, PermissionExportsRead, tenantScope); err != nil {
		return nil, err
	}
	if a.exportWatch == nil {
		return nil, errors.New("export subscriptions are not enabled")
	}
	e, err := a.visibleExport(ctx, a.store, id, exportID, false)
	if err != nil {
		return nil, err
	}
	signal, stop := a.exportWatch.WatchDataExport(e.TenantID, e.ID)
	// Read again after the watch began, so no change falls between.
	if e, err = a.store.GetDataExport(ctx, e.TenantID, e.ID, false); err != nil {
		stop()
		return nil, err
	}
	return &DataExportStream{app: a, id: id, export: e, signal: signal, stop: stop}, nil
}

// ErrStreamEnded is returned by Next after the last value.
var ErrStreamEnded = errors.New("stream ended")

// Next returns the export's next state; ErrStreamEnded after EXPIRED.
func (s *DataExportStream) Next(ctx context.Context) (*domain.DataExport, error) {
	if !s.sent {
		s.sent = true
		e := s.export
		return &e, nil
	}
	for {
		if s.export.State == domain.DataExportExpired {
			return nil, ErrStreamEnded
		}
		t := time.NewTimer(exportPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-s.signal:
		case <-t.C:
		}
		t.Stop()
		e, err := s.app.store.GetDataExport(ctx, s.export.TenantID, s.export.ID, false)
		if err != nil {
			return nil, err
		}
		if e.State != s.export.State || e.ProgressRows != s.export.ProgressRows || e.ProgressBytes != s.export.ProgressBytes {
			s.export = e
			return &e, nil
		}
	}
}

// Close stops the stream.
func (s *DataExportStream) Close() { s.stop() }
