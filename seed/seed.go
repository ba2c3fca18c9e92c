// Package seed generates realistic demo audit events for `aether seed`, the
// benchmarks and tests: device, user and alarm activity of an IoT platform.
package seed

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

type template struct {
	action       string
	subjectType  domain.SubjectType
	resourceType string
	risk         domain.Risk
}

var templates = []template{
	{"device.firmware.updated", domain.SubjectService, "device", domain.RiskMedium},
	{"device.config.changed", domain.SubjectUser, "device", domain.RiskLow},
	{"device.registered", domain.SubjectService, "device", ""},
	{"device.decommissioned", domain.SubjectUser, "device", domain.RiskHigh},
	{"alarm.raised", domain.SubjectSystem, "alarm", ""},
	{"alarm.acknowledged", domain.SubjectUser, "alarm", ""},
	{"alarm.cleared", domain.SubjectSystem, "alarm", ""},
	{"user.login", domain.SubjectUser, "session", ""},
	{"user.role.granted", domain.SubjectUser, "user", domain.RiskHigh},
	{"telemetry.rule.updated", domain.SubjectUser, "rule", domain.RiskLow},
}

var people = []string{"Ada Lovelace", "Grace Hopper", "Linus Pauling", "Marie Curie", "Alan Turing", "Katherine Johnson"}

var outcomes = []domain.Outcome{
	domain.OutcomeSuccess, domain.OutcomeSuccess, domain.OutcomeSuccess, domain.OutcomeSuccess,
	domain.OutcomeSuccess, domain.OutcomeSuccess, domain.OutcomeFailure, domain.OutcomeDenied, domain.OutcomeError,
}

// Generator makes demo events; it is deterministic for a given seed.
type Generator struct {
	rng   *rand.Rand
	clock time.Time
}

// NewGenerator returns a generator whose events start at start and advance
// by a few seconds each.
func NewGenerator(seed uint64, start time.Time) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clock: start}
}

// Events returns n demo drafts for projectID, each with a fresh UUID.
func (g *Generator) Events(projectID string, n int) []domain.AuditEventDraft {
	out := make([]domain.AuditEventDraft, n)
	for i := range out {
		out[i] = g.next(projectID)
	}
	return out
}

func (g *Generator) next(projectID string) domain.AuditEventDraft {
	t := templates[g.rng.IntN(len(templates))]
	g.clock = g.clock.Add(time.Duration(1+g.rng.IntN(5000)) * time.Millisecond)
	d := domain.AuditEventDraft{
		ID:         uuid.Must(uuid.NewV7()),
		ProjectID:  projectID,
		Action:     t.action,
		OccurredAt: g.clock,
		Outcome:    outcomes[g.rng.IntN(len(outcomes))],
		Resource:   domain.Resource{Type: t.resourceType, ID: fmt.Sprintf("%s-%04d", t.resourceType, g.rng.IntN(500))},
	}
	switch t.subjectType {
	case domain.SubjectUser:
		p := g.rng.IntN(len(people))
		d.Subject = domain.Subject{Type: t.subjectType, ID: fmt.Sprintf("user-%02d", p), DisplayName: people[p]}
	case domain.SubjectService:
		d.Subject = domain.Subject{Type: t.subjectType, ID: "svc-device-manager", DisplayName: "Device manager"}
	default:
		d.Subject = domain.Subject{Type: t.subjectType, ID: "system"}
	}
	if t.risk != "" {
		d.Governance = &domain.Governance{Reason: "scheduled maintenance window", Ticket: fmt.Sprintf("OPS-%d", 1000+g.rng.IntN(9000)), Risk: t.risk}
	}
	d.Correlation = &domain.Correlation{RequestID: fmt.Sprintf("req-%08x", g.rng.Uint32())}
	details := map[string]any{
		"region":   []string{"eu-west", "us-east", "ap-south"}[g.rng.IntN(3)],
		"attempt":  1 + g.rng.IntN(3),
		"firmware": map[string]any{"from": "1.4.2", "to": "1.5.0"},
	}
	d.Details, _ = json.Marshal(details)
	if g.rng.IntN(4) == 0 {
		d.EvidenceDigests = []domain.EvidenceDigest{{Algorithm: "sha256", Value: fmt.Sprintf("%064x", g.rng.Uint64()), Label: "change-request"}}
	}
	return d
}
