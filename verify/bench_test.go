package verify

import (
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// benchLine is a typical export line: a v2 event with small details.
func benchLine(b *testing.B) []byte {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d := domain.AuditEventDraft{
		ID: uuid.New(), ProjectID: "bench-verify", Action: "device.firmware.updated", OccurredAt: now.Add(-time.Second),
		Subject:    domain.Subject{Type: domain.SubjectService, ID: "gateway-3", DisplayName: "Plant gateway"},
		Resource:   domain.Resource{Type: "device", ID: "device-42"},
		Outcome:    domain.OutcomeSuccess,
		Details:    json.RawMessage(`{"firmware":"4.2.1","previous":"4.1.9","sizeBytes":1049000,"ratio":0.50,"site":"north"}`),
		RecordedBy: &domain.Recorder{Issuer: "https://idp.example.com/", Subject: "ingest-service", TokenID: "6f1c2a9e0b7d4c3f", ClientID: "plant-gateway"},
	}
	if err := d.Normalize("", now); err != nil {
		b.Fatal(err)
	}
	events, _ := domain.ChainHead{}.Append("bench", []domain.AuditEventDraft{d}, now)
	line, err := eventjson.Append(nil, &events[0])
	if err != nil {
		b.Fatal(err)
	}
	return line
}

func BenchmarkParseLine(b *testing.B) {
	raw := benchLine(b)
	b.SetBytes(int64(len(raw)))
	var l line
	for b.Loop() {
		if err := parseLine(raw, &l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLineHash(b *testing.B) {
	raw := benchLine(b)
	var l line
	if err := parseLine(raw, &l); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		_ = l.event.ComputeChainHash(l.claimed)
	}
}

func BenchmarkBaselineSHA256(b *testing.B) {
	raw := benchLine(b)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		_ = sha256.Sum256(raw)
	}
}
