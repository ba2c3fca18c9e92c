package export

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/aetheriot/aether-audit/domain"
)

// ndjsonEncoder writes each row as its encoding/json form followed by "\n".
type ndjsonEncoder struct {
	w *bufio.Writer
}

func (e ndjsonEncoder) encodeAudit(v *domain.AuditEvent) error         { return e.encode(v) }
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
