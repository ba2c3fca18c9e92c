package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/aetheriot/aether-audit/domain"
)

// driver names a real bucket implementation the tests run against.
type driver struct {
	name string
	open func(t *testing.T) *blob.Bucket
}

// drivers are the bucket implementations every storage test covers.
var drivers = []driver{
	{name: "mem", open: func(t *testing.T) *blob.Bucket {
		b := memblob.OpenBucket(nil)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
	{name: "file", open: func(t *testing.T) *blob.Bucket {
		b, err := OpenBucket(context.Background(), "file://"+t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
}

var baseTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// sampleAudit returns the i-th test audit event; odd events carry every
// optional part, even ones none.
func sampleAudit(i int) *domain.AuditEvent {
	e := &domain.AuditEvent{
		ID:         uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "audit-%d", i)),
		TenantID:   "tenant-1",
		ProjectID:  "project/α",
		Sequence:   uint64(1000 + i),
		Action:     "device.config.update",
		OccurredAt: baseTime.Add(time.Duration(i) * time.Second),
		RecordedAt: baseTime.Add(time.Duration(i)*time.Second + 250*time.Millisecond),
		Subject:    domain.Subject{Type: domain.SubjectUser, ID: "u-42", DisplayName: `Ada "the, admin"`},
		Resource:   domain.Resource{Type: "device", ID: fmt.Sprintf("dev-%d", i)},
		Outcome:    domain.OutcomeSuccess,
	}
	e.ChainHash = sha256.Sum256(fmt.Appendf(nil, "chain-%d", i))
	e.ChainVersion = domain.ChainVersionOriginal
	if i%2 == 1 {
		e.ChainVersion = domain.ChainVersionRecordedBy
		e.RecordedBy = &domain.Recorder{Issuer: "https://idp", Subject: "svc-1", TokenID: "j-1", ClientID: "=cmd"}
		e.Governance = &domain.Governance{Reason: "=HYPERLINK(\"x\")", Ticket: "OPS-1", Risk: domain.RiskHigh, ConfirmedBy: "u-7"}
		e.Correlation = &domain.Correlation{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RequestID: "req-1", CausationID: "cause-1"}
		e.EvidenceDigests = []domain.EvidenceDigest{{Algorithm: "sha256", Value: "ab", Label: "photo"}}
		e.Details = json.RawMessage(`{"after":{"mode":"eco"},"note":"line1\nline2"}`)
	}
	return e
}

// sampleAlarm returns the i-th test alarm record.
func sampleAlarm(i int) *domain.AlarmRecord {
	a := &domain.AlarmRecord{
		TenantID:   "tenant-1",
		ProjectID:  "p1",
		ID:         uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "alarm-%d", i)),
		OccurredAt: baseTime.Add(time.Duration(i) * time.Minute),
		AlarmID:    "overheat",
		DeviceID:   fmt.Sprintf("dev-%d", i),
		Severity:   domain.AlarmMajor,
		State:      domain.AlarmRaised,
		Message:    "temperature, high\r\n+check",
	}
	if i%2 == 1 {
		a.Details = json.RawMessage(`{"celsius":81.5}`)
	}
	return a
}

// samplePoint returns the i-th test telemetry point.
func samplePoint(i int) *domain.TelemetryPoint {
	return &domain.TelemetryPoint{
		TenantID:   "tenant-1",
		ProjectID:  "p1",
		DeviceID:   fmt.Sprintf("dev-%d", i),
		Metric:     "temperature",
		OccurredAt: baseTime.Add(time.Duration(i) * time.Millisecond),
		Value:      21.5 + float64(i)/3,
		Unit:       "°C",
	}
}

// writeRows writes rows 0..n-1 of kind to w.
func writeRows(w *ObjectWriter, kind domain.DataExportKind, n int) error {
	for i := range n {
		var err error
		switch kind {
		case domain.DataExportAudit:
			err = w.WriteAudit(sampleAudit(i))
		case domain.DataExportAlarm:
			err = w.WriteAlarm(sampleAlarm(i))
		case domain.DataExportTelemetry:
			err = w.WriteTelemetry(samplePoint(i))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readObject returns the stored bytes of key.
func readObject(t *testing.T, b *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	require.NoError(t, err)
	return data
}

// digestOf returns the ObjectResult digest form of data, computed
// independently of the package.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// requireAbsent fails unless nothing is stored under key.
func requireAbsent(t *testing.T, b *blob.Bucket, key string) {
	t.Helper()
	exists, err := b.Exists(context.Background(), key)
	require.NoError(t, err)
	require.False(t, exists, "object %s exists", key)
}

// listKeys returns every key of b under prefix.
func listKeys(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		require.NoError(t, err)
		keys = append(keys, obj.Key)
	}
}
