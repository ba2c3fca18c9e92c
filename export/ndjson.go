package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// ndjsonEncoder writes each row as its encoding/json form followed by "\n".
type ndjsonEncoder struct {
	w *bufio.Writer
}

// auditRowRoom is the free buffer space below which an audit row is encoded
// into a pooled spill buffer rather than straight into the writer's buffer,
// where it would likely not fit and append would allocate.
const auditRowRoom = 4 << 10

// spillBuffers holds the buffers of audit rows that do not fit the writer's
// free space.
var spillBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2*auditRowRoom); return &b }}

// encodeAudit encodes the event with eventjson's reflection-free encoder, which
// writes what json.Marshal writes, straight into the writer's buffer when
// there is room, so a row costs no allocation. A row json.Marshal refuses
// (invalid details JSON) fails and writes nothing.
func (e ndjsonEncoder) encodeAudit(v *domain.AuditEvent) error {
	if e.w.Available() >= auditRowRoom {
		line, err := eventjson.Append(e.w.AvailableBuffer(), v)
		if err != nil {
			return fmt.Errorf("export: encode row as JSON: %w", err)
		}
		// Write copies line onto itself unless it outgrew the free space.
		_, err = e.w.Write(append(line, '\n'))
		return err
	}
	bp := spillBuffers.Get().(*[]byte)
	defer spillBuffers.Put(bp)
	line, err := eventjson.Append((*bp)[:0], v)
	if err != nil {
		return fmt.Errorf("export: encode row as JSON: %w", err)
	}
	line = append(line, '\n')
	if cap(line) <= 1<<20 { // keep a grown buffer, unless it is huge
		*bp = line
	}
	_, err = e.w.Write(line)
	return err
}

func (e ndjsonEncoder) encodeAlarm(v *domain.AlarmRecord) error        { return e.encode(v) }
func (e ndjsonEncoder) encodeTelemetry(v *domain.TelemetryPoint) error { return e.encode(v) }

// encode writes one line. A value encoding/json refuses (a NaN telemetry
// value, invalid details JSON) fails the row and writes nothing.
func (e ndjsonEncoder) encode(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("export: encode row as JSON: %w", err)
	}
	if _, err := e.w.Write(line); err != nil {
		return err
	}
	return e.w.WriteByte('\n')
}

func (e ndjsonEncoder) flush() error { return e.w.Flush() }
