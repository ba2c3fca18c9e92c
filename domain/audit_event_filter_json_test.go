package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

func TestAuditEventFilterJSON(t *testing.T) {
	t.Parallel()
	prefix, err := domain.ParseActionPattern("filter.action", "device.*")
	require.NoError(t, err)
	from, to := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	lo, hi := uint64(2), uint64(1<<63)
	f := domain.AuditEventFilter{Action: &prefix, SubjectID: "u1", ResourceType: "device", ResourceID: "d1",
		Outcomes: []domain.Outcome{domain.OutcomeFailure, domain.OutcomeDenied}, OccurredFrom: &from, OccurredTo: &to,
		SequenceFrom: &lo, SequenceTo: &hi, RecordedBySubject: "svc", RequestID: "r1", CausationID: "c1"}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	require.JSONEq(t, `{"action":"device.*","subjectId":"u1","resourceType":"device","resourceId":"d1",
		"outcome":["FAILURE","DENIED"],"occurredFrom":"2026-01-02T03:04:05.000006Z","occurredTo":"2026-01-03T00:00:00Z",
		"sequenceFrom":"2","sequenceTo":"9223372036854775808","recordedBySubject":"svc",
		"correlation":{"requestId":"r1","causationId":"c1"}}`, string(b), "the shape of the GraphQL input, sequences as strings")
	var back domain.AuditEventFilter
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, f, back)

	exact, err := domain.ParseActionPattern("filter.action", "a.b")
	require.NoError(t, err)
	b, err = json.Marshal(domain.AuditEventFilter{Action: &exact})
	require.NoError(t, err)
	require.JSONEq(t, `{"action":"a.b"}`, string(b), "only the conditions set")
	require.True(t, (&domain.AuditEventFilter{}).IsZero())
	require.False(t, (&domain.AuditEventFilter{TraceID: "x"}).IsZero())
	require.Error(t, json.Unmarshal([]byte(`{"action":"Not An Action"}`), &back))
}
