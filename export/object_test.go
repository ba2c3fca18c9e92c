package export

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

func TestCreateObjectRefusesExistingKey(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := d.open(t)
			key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportUncompressed)
			require.NoError(t, b.WriteAll(ctx, key, []byte("first"), nil))

			_, err := CreateObject(ctx, b, key, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
			require.ErrorIs(t, err, ErrExists)
			require.Equal(t, []byte("first"), readObject(t, b, key))
		})
	}
}

// TestCommitLosesRaceToOtherWriter checks the conditional write: an object
// stored under the key after CreateObject makes Commit fail, and the
// following Abort leaves the other writer's object alone.
func TestCommitLosesRaceToOtherWriter(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := d.open(t)
			key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportUncompressed)
			w, err := CreateObject(ctx, b, key, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
			require.NoError(t, err)
			require.NoError(t, writeRows(w, domain.DataExportAudit, 3))

			require.NoError(t, b.WriteAll(ctx, key, []byte("winner"), nil))
			_, err = w.Commit()
			require.ErrorIs(t, err, ErrExists)
			w.Abort()
			require.Equal(t, []byte("winner"), readObject(t, b, key))
		})
	}
}

func TestCreateObjectRejectsUndefinedShape(t *testing.T) {
	t.Parallel()
	b := drivers[0].open(t)
	ctx := context.Background()
	_, err := CreateObject(ctx, b, "k1", "EVENTS", domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
	require.ErrorContains(t, err, "kind")
	_, err = CreateObject(ctx, b, "k2", domain.DataExportAudit, "XML", domain.DataExportUncompressed, 0)
	require.ErrorContains(t, err, "format")
	_, err = CreateObject(ctx, b, "k3", domain.DataExportAudit, domain.DataExportCSV, "ZSTD", 0)
	require.ErrorContains(t, err, "compression")
	require.Empty(t, listKeys(t, b, ""))
}

func TestWriteRefusesOtherKind(t *testing.T) {
	t.Parallel()
	b := drivers[0].open(t)
	w, err := CreateObject(context.Background(), b, "k", domain.DataExportAlarm, domain.DataExportCSV, domain.DataExportUncompressed, 0)
	require.NoError(t, err)
	defer w.Abort()
	require.ErrorContains(t, w.WriteAudit(sampleAudit(0)), "holds ALARM rows")
	require.ErrorContains(t, w.WriteTelemetry(samplePoint(0)), "holds ALARM rows")
	// A refused kind does not spoil the writer.
	require.NoError(t, w.WriteAlarm(sampleAlarm(0)))
	res, err := w.Commit()
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Rows)
}

func TestAbortMidWriteLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		for _, compression := range []domain.DataExportCompression{domain.DataExportUncompressed, domain.DataExportGzip} {
			t.Run(d.name+"/"+string(compression), func(t *testing.T) {
				t.Parallel()
				b := d.open(t)
				exportID := uuid.New()
				key := Key("t", "p", exportID, 1, domain.DataExportCSV, compression)
				w, err := CreateObject(context.Background(), b, key, domain.DataExportAudit, domain.DataExportCSV, compression, 0)
				require.NoError(t, err)
				// Enough rows to push several buffers to storage.
				require.NoError(t, writeRows(w, domain.DataExportAudit, 2000))
				_, stored := w.Progress()
				require.NotZero(t, stored)

				w.Abort()
				w.Abort()
				requireAbsent(t, b, key)
				require.Empty(t, listKeys(t, b, KeyPrefix("t", "p", exportID)))

				require.ErrorContains(t, w.WriteAudit(sampleAudit(0)), "aborted")
				_, err = w.Commit()
				require.ErrorContains(t, err, "aborted")
			})
		}
	}
}

func TestAbortAfterCommitKeepsObject(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := d.open(t)
			key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportGzip)
			w, err := CreateObject(context.Background(), b, key, domain.DataExportTelemetry, domain.DataExportNDJSON, domain.DataExportGzip, 0)
			require.NoError(t, err)
			require.NoError(t, writeRows(w, domain.DataExportTelemetry, 10))
			res, err := w.Commit()
			require.NoError(t, err)

			again, err := w.Commit()
			require.NoError(t, err)
			require.Equal(t, res, again)
			require.ErrorContains(t, w.WriteTelemetry(samplePoint(0)), "already committed")

			w.Abort()
			w.Abort()
			require.Equal(t, res.Digest, digestOf(readObject(t, b, key)))
		})
	}
}

func TestCancelledContextStopsTheWrite(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			b := d.open(t)
			key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportUncompressed)
			w, err := CreateObject(ctx, b, key, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
			require.NoError(t, err)
			require.NoError(t, writeRows(w, domain.DataExportAudit, 10))
			cancel()

			err = writeRows(w, domain.DataExportAudit, 5000)
			if err == nil {
				_, err = w.Commit()
			}
			require.ErrorIs(t, err, context.Canceled)
			w.Abort()
			requireAbsent(t, b, key)
		})
	}
}

// TestProgressFromAnotherGoroutine reads Progress while rows are written;
// the race detector checks the synchronisation.
func TestProgressFromAnotherGoroutine(t *testing.T) {
	t.Parallel()
	b := drivers[0].open(t)
	w, err := CreateObject(context.Background(), b, "k", domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportGzip, 0)
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var lastRows, lastBytes uint64
	wg.Go(func() {
		for {
			rows, bytes := w.Progress()
			if rows < lastRows || bytes < lastBytes {
				panic("progress went backwards")
			}
			lastRows, lastBytes = rows, bytes
			select {
			case <-done:
				return
			default:
			}
		}
	})
	require.NoError(t, writeRows(w, domain.DataExportAudit, 3000))
	res, err := w.Commit()
	close(done)
	wg.Wait()
	require.NoError(t, err)
	require.LessOrEqual(t, lastRows, res.Rows)
	require.LessOrEqual(t, lastBytes, res.Bytes)
}

// TestAbortFromAnotherGoroutine aborts while rows are being written.
func TestAbortFromAnotherGoroutine(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := d.open(t)
			w, err := CreateObject(context.Background(), b, "k.ndjson", domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
			require.NoError(t, err)
			started := make(chan struct{})
			errc := make(chan error, 1)
			go func() {
				close(started)
				for i := 0; ; i++ {
					if err := w.WriteAudit(sampleAudit(i)); err != nil {
						errc <- err
						return
					}
				}
			}()
			<-started
			w.Abort()
			err = <-errc
			require.True(t, errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "aborted"), err)
			requireAbsent(t, b, "k.ndjson")
		})
	}
}
