package export

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/aetheriot/aether-audit/domain"
)

// ErrExists is returned by CreateObject, or by Commit when another writer won
// the race, when an object already exists under the key: objects are written
// once and never overwritten.
var ErrExists = errors.New("export: object already exists")

// ObjectResult describes a committed object.
type ObjectResult struct {
	// Digest is "sha256:" followed by the 64 lower-case hex digits of the
	// SHA-256 of the object's stored bytes (after compression).
	Digest string
	// Bytes is the length of the stored object (after compression).
	Bytes uint64
	// Rows is the number of rows written, not counting a CSV header.
	Rows uint64
}

// bufferSize is the size of the buffers in the write pipeline.
const bufferSize = 64 << 10

// abortTimeout bounds the clean-up Abort does after cancelling a write.
const abortTimeout = time.Minute

// The lifecycle of an ObjectWriter.
const (
	stateOpen      = iota // accepting rows
	stateFailed           // a Write or Commit failed; only Abort is useful
	stateCommitted        // the object is stored
	stateAborted          // the write is discarded
)

// ObjectWriter writes one export object as a stream:
//
//	rows -> encoder -> [gzip] -> SHA-256 + byte count + size limit -> bucket
//
// It holds a bounded amount of memory whatever the size of the object. The
// digest and length it reports are of the object as stored, after gzip. The
// object becomes visible only at a successful Commit; until then, and
// whenever Abort is called instead, readers of the bucket see nothing under
// the key.
//
// Write methods and Commit are meant for one goroutine; Progress and Abort
// may be called from any goroutine.
type ObjectWriter struct {
	parent context.Context
	cancel context.CancelFunc
	bucket *blob.Bucket
	key    string
	kind   domain.DataExportKind

	mu      sync.Mutex
	state   int
	err     error // why the writer failed, returned again by later calls
	storage *blob.Writer
	closed  bool // storage.Close has been called
	// ambiguous is set when storage.Close failed in a way that may still
	// have stored the object, which Abort then deletes.
	ambiguous bool
	sink      *bufio.Writer // between the meter and storage
	meter     *meter
	gz        *gzip.Writer // nil when uncompressed
	// pipe carries the encoded bytes to a second goroutine that compresses
	// (gz), hashes and counts (meter) and stores them.
	pipe *pipe
	top  *bufio.Writer
	enc  rowEncoder
	rows atomic.Uint64
}

// CreateObject starts writing the object key of bucket, holding rows of kind
// encoded as format and compressed with compression.
//
// The object is stored with Content-Type "application/x-ndjson" (NDJSON),
// "text/csv; charset=utf-8" (CSV) or, when gzipped, "application/gzip": a
// gzipped object is the .gz file itself, with no Content-Encoding.
//
// Objects are written once: CreateObject fails with ErrExists when key is
// already present, and the write is conditional on the key still being
// absent when it is committed (where the driver supports it; file, mem and
// s3 do).
//
// maxBytes bounds the stored (compressed) size; 0 means no bound. The write
// that would pass it, or Commit when the final flush would, fails with
// ErrTooLarge. Writing continues with ctx: cancelling it makes the next
// write or Commit fail.
//
// The caller ends every ObjectWriter with Commit or Abort.
func CreateObject(ctx context.Context, bucket *blob.Bucket, key string, kind domain.DataExportKind, format domain.DataExportFormat, compression domain.DataExportCompression, maxBytes uint64) (*ObjectWriter, error) {
	if err := validateShape(kind, format, compression); err != nil {
		return nil, err
	}
	exists, err := bucket.Exists(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("export: check object %s: %w", key, err)
	}
	if exists {
		return nil, fmt.Errorf("%w: %s", ErrExists, key)
	}
	wctx, cancel := context.WithCancel(ctx)
	storage, err := bucket.NewWriter(wctx, key, &blob.WriterOptions{
		ContentType: contentType(format, compression),
		IfNotExist:  true,
		BeforeWrite: ownerOnly,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("export: create object %s: %w", key, err)
	}
	w := &ObjectWriter{parent: ctx, cancel: cancel, bucket: bucket, key: key, kind: kind, storage: storage}
	w.sink = bufio.NewWriterSize(storage, bufferSize)
	w.meter = newMeter(wctx, w.sink, maxBytes)
	if compression == domain.DataExportGzip {
		w.gz = gzip.NewWriter(w.meter)
		w.pipe = newPipe(wctx, w.gz)
	} else {
		w.pipe = newPipe(wctx, w.meter)
	}
	w.top = bufio.NewWriterSize(w.pipe, bufferSize)
	if format == domain.DataExportCSV {
		enc, err := newCSVEncoder(w.top, kind)
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("export: create object %s: %w", key, err)
		}
		w.enc = enc
	} else {
		w.enc = ndjsonEncoder{w: w.top}
	}
	return w, nil
}

// WriteAudit appends one audit event. It fails unless the object holds
// AUDIT rows.
func (w *ObjectWriter) WriteAudit(e *domain.AuditEvent) error {
	return w.write(domain.DataExportAudit, func() error { return w.enc.encodeAudit(e) })
}

// WriteAlarm appends one alarm record. It fails unless the object holds
// ALARM rows.
func (w *ObjectWriter) WriteAlarm(a *domain.AlarmRecord) error {
	return w.write(domain.DataExportAlarm, func() error { return w.enc.encodeAlarm(a) })
}

// WriteTelemetry appends one telemetry point. It fails unless the object
// holds TELEMETRY rows.
func (w *ObjectWriter) WriteTelemetry(p *domain.TelemetryPoint) error {
	return w.write(domain.DataExportTelemetry, func() error { return w.enc.encodeTelemetry(p) })
}

// write runs encode for one row of kind and counts it. Any error leaves the
// writer failed.
func (w *ObjectWriter) write(kind domain.DataExportKind, encode func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if kind != w.kind {
		return fmt.Errorf("export: cannot write a %s row to %s, which holds %s rows", kind, w.key, w.kind)
	}
	if err := encode(); err != nil {
		return w.fail(fmt.Errorf("export: write row %d of %s: %w", w.rows.Load()+1, w.key, err))
	}
	w.rows.Add(1)
	return nil
}

// Progress returns the rows written so far and the bytes stored so far. The
// byte count lags the rows by what the encoder and compressor still buffer
// (at most a few hundred KiB) until Commit. It is safe to call from any
// goroutine.
func (w *ObjectWriter) Progress() (rows, bytes uint64) {
	return w.rows.Load(), w.meter.bytes()
}

// Commit flushes the encoder and the compressor, closes the storage writer,
// which makes the complete object visible at once, and returns its digest,
// length and row count. After an error the object is not committed and the
// caller calls Abort. Commit after a successful Commit returns the same
// result.
func (w *ObjectWriter) Commit() (ObjectResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == stateCommitted {
		return w.result(), nil
	}
	if err := w.usable(); err != nil {
		return ObjectResult{}, err
	}
	if err := w.enc.flush(); err != nil {
		return ObjectResult{}, w.fail(fmt.Errorf("export: commit %s: flush encoder: %w", w.key, err))
	}
	if err := w.pipe.flush(); err != nil {
		return ObjectResult{}, w.fail(fmt.Errorf("export: commit %s: %w", w.key, err))
	}
	w.pipe.close()
	if w.gz != nil {
		if err := w.gz.Close(); err != nil {
			return ObjectResult{}, w.fail(fmt.Errorf("export: commit %s: finish gzip: %w", w.key, err))
		}
	}
	if err := w.sink.Flush(); err != nil {
		return ObjectResult{}, w.fail(fmt.Errorf("export: commit %s: flush: %w", w.key, err))
	}
	w.closed = true
	if err := w.storage.Close(); err != nil {
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			err = fmt.Errorf("%w: %w", ErrExists, err)
		} else {
			w.ambiguous = true
		}
		return ObjectResult{}, w.fail(fmt.Errorf("export: commit %s: %w", w.key, err))
	}
	w.state = stateCommitted
	w.cancel()
	return w.result(), nil
}

// Abort discards the write: afterwards nothing of it is in the bucket. It
// cancels the write's context before closing the storage writer, which makes
// the driver drop what it received, and deletes the key if the object was
// stored anyway (a driver that ignored the cancellation, or a Commit that
// failed after the service may have stored it). It never deletes an object
// another writer stored under the same key. Clean-up failures are not
// reported: a later DeletePrefix removes such leftovers.
//
// Abort after Commit does nothing, and Abort may be called more than once
// and from any goroutine, including while a Write is blocked on storage.
func (w *ObjectWriter) Abort() {
	// Cancelling first unblocks a Write stuck on storage; after a Commit
	// it changes nothing.
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == stateCommitted || w.state == stateAborted {
		return
	}
	w.state = stateAborted
	if w.err == nil {
		w.err = fmt.Errorf("export: object %s: write aborted", w.key)
	}
	if w.pipe != nil {
		w.pipe.close() // the context is cancelled: it drops what it holds
	}
	stored := w.ambiguous
	if !w.closed {
		w.closed = true
		// With the context cancelled, a nil error means the driver
		// stored the object regardless.
		stored = w.storage.Close() == nil
	}
	if !stored {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.parent), abortTimeout)
	defer cancel()
	_ = w.bucket.Delete(ctx, w.key)
}

// usable returns nil while the writer accepts rows, or the reason it does
// not. It runs with mu held.
func (w *ObjectWriter) usable() error {
	switch w.state {
	case stateOpen:
		return nil
	case stateCommitted:
		return fmt.Errorf("export: object %s is already committed", w.key)
	default:
		return w.err
	}
}

// fail records err as the reason the writer is unusable and returns it. It
// runs with mu held.
func (w *ObjectWriter) fail(err error) error {
	w.state = stateFailed
	w.err = err
	return err
}

// result describes the committed object. It runs with mu held.
func (w *ObjectWriter) result() ObjectResult {
	return ObjectResult{Digest: w.meter.digest(), Bytes: w.meter.bytes(), Rows: w.rows.Load()}
}

// ownerOnly makes an object written to a folder (file://) readable by the
// service's own user only: exports hold a tenant's evidence. Other drivers
// have no file to restrict.
func ownerOnly(as func(any) bool) error {
	var f *os.File
	if as(&f) && f != nil {
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("export: restricting the object file: %w", err)
		}
	}
	return nil
}
