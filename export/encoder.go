package export

import (
	"github.com/aetheriot/aether-audit/domain"
)

// rowEncoder turns rows into the bytes of one object format. It writes to a
// buffered writer; flush pushes everything it holds downstream.
type rowEncoder interface {
	encodeAudit(e *domain.AuditEvent) error
	encodeAlarm(a *domain.AlarmRecord) error
	encodeTelemetry(p *domain.TelemetryPoint) error
	flush() error
}
