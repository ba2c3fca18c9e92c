package streamsink

import (
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// Format is how a sink's batches encode their events.
type Format int

// The formats of the sinks.
const (
	// FormatNDJSON: one event per line in the API's shape (HTTPS).
	FormatNDJSON Format = iota
	// FormatGzipNDJSON: the NDJSON of HTTPS, gzipped (S3 objects).
	FormatGzipNDJSON
	// FormatSplunkHEC: one HEC event object per event (SplunkHEC).
	FormatSplunkHEC
	// FormatDatadogLogs: a JSON array of one log per event (DatadogLogs).
	FormatDatadogLogs
)

// Batch is one delivery of a stream: events of one project, encoded in the
// sink's format as they are appended, so that the stream worker never
// holds decoded events (it appends each row as it streams from
// PostgreSQL, borrowing the row's buffer). Get one with NewBatch, append
// events in sequence order, Finish it, hand it to Sink.Deliver, and
// Release it afterwards: batches and their buffers (and gzip state) are
// pooled.
type Batch struct {
	TenantID  string
	ProjectID string
	// Through is the sequence the cursor moves to once the sink
	// acknowledged the batch (at least Last; more when the stream's filter
	// left out the events after it).
	Through uint64
	// First and Last are the sequences of the first and last event, Events
	// their number.
	First, Last uint64
	Events      int
	// FirstRecordedAt is the recordedAt of the first event.
	FirstRecordedAt time.Time
	// LastChainHash is the chain hash of the last event.
	LastChainHash domain.Hash

	format Format
	body   []byte
	// For FormatGzipNDJSON: the lines not yet compressed, and the gzip
	// writer compressing into body.
	lines []byte
	zw    *gzip.Writer
}

// ObjectGzipLevel is the compression of S3 objects: klauspost/compress's
// fastest gzip level, several times cheaper than the standard library's
// default level (which made compression most of a backfill's CPU) for
// objects about a tenth larger.
const ObjectGzipLevel = gzip.BestSpeed

// gzipChunk is how many bytes of lines a gzip batch gathers before it
// compresses them.
const gzipChunk = 64 << 10

// maxPooledBody is the largest buffer a released batch keeps.
const maxPooledBody = 16 << 20

var batchPool = sync.Pool{New: func() any { return new(Batch) }}

// NewBatch returns an empty batch of tenantID/projectID in format f, from
// the pool.
func NewBatch(f Format, tenantID, projectID string) *Batch {
	b := batchPool.Get().(*Batch)
	b.TenantID, b.ProjectID, b.format = tenantID, projectID, f
	b.Through, b.First, b.Last, b.Events = 0, 0, 0, 0
	b.FirstRecordedAt, b.LastChainHash = time.Time{}, domain.Hash{}
	b.body, b.lines = b.body[:0], b.lines[:0]
	switch f {
	case FormatGzipNDJSON:
		if b.zw == nil {
			// Only an invalid level fails.
			b.zw, _ = gzip.NewWriterLevel((*appendWriter)(&b.body), ObjectGzipLevel)
		} else {
			b.zw.Reset((*appendWriter)(&b.body))
		}
	case FormatDatadogLogs:
		b.body = append(b.body, '[')
	}
	return b
}

// Release returns b to the pool; b must not be used after.
func (b *Batch) Release() {
	if cap(b.body) > maxPooledBody || cap(b.lines) > maxPooledBody {
		return
	}
	batchPool.Put(b)
}

// Append encodes e, the next event of the batch, into it. e is not kept:
// it may borrow a buffer that changes after the call.
func (b *Batch) Append(e *domain.AuditEvent) error {
	var err error
	switch b.format {
	case FormatNDJSON:
		b.body, err = appendLine(b.body, e)
	case FormatGzipNDJSON:
		if b.lines, err = appendLine(b.lines, e); err == nil && len(b.lines) >= gzipChunk {
			err = b.compress()
		}
	case FormatSplunkHEC:
		b.body, err = appendSplunkEvent(b.body, e)
	case FormatDatadogLogs:
		if b.Events > 0 {
			b.body = append(b.body, ',')
		}
		b.body, err = appendDatadogLog(b.body, e)
	}
	if err != nil {
		return err
	}
	if b.Events == 0 {
		b.First, b.FirstRecordedAt = e.Sequence, e.RecordedAt
	}
	b.Last, b.LastChainHash = e.Sequence, e.ChainHash
	b.Events++
	return nil
}

// appendLine appends e's NDJSON line.
func appendLine(out []byte, e *domain.AuditEvent) ([]byte, error) {
	out, err := eventjson.Append(out, e)
	if err != nil {
		return out, fmt.Errorf("encoding event %d: %w", e.Sequence, err)
	}
	return append(out, '\n'), nil
}

// compress moves the gathered lines through gzip into the body.
func (b *Batch) compress() error {
	_, err := b.zw.Write(b.lines)
	b.lines = b.lines[:0]
	return err
}

// Finish completes the body after the last Append.
func (b *Batch) Finish() error {
	switch b.format {
	case FormatGzipNDJSON:
		if err := b.compress(); err != nil {
			return err
		}
		return b.zw.Close()
	case FormatDatadogLogs:
		b.body = append(b.body, ']')
	}
	return nil
}

// Body is the batch's encoded events, once finished.
func (b *Batch) Body() []byte { return b.body }

// id is the stable id of the batch's requests (webhook-id where signed):
// "<stream>:<first>-<last>:<project>".
func (b *Batch) id(streamID string) string {
	return fmt.Sprintf("%s:%d-%d:%s", streamID, b.First, b.Last, b.ProjectID)
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter []byte

func (w *appendWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}
