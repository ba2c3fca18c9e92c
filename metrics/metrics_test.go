package metrics

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWebhookAttemptCountersAreBoundOnce: the three outcomes that end
// attempts have their series from the start (at 0: bound when the metrics
// are made, not looked up per attempt), an attempt is counted without
// allocating, and another outcome still gets its own series.
func TestWebhookAttemptCountersAreBoundOnce(t *testing.T) {
	m := New(slog.Default())
	outcome := string([]byte("succeeded")) // not the string the counters were bound with
	allocs := testing.AllocsPerRun(100, func() { m.WebhookAttempt(outcome, 0) })
	require.Zero(t, allocs, "allocations per attempt")
	m.WebhookAttempt("failed", 0)
	m.WebhookAttempt("other", 0)
	require.Equal(t, map[string]float64{"succeeded": 101, "failed": 1, "unknown": 0, "other": 1}, attemptCounts(t, m))
}

// attemptCounts reads webhook_attempts_total by outcome from m's registry.
func attemptCounts(t *testing.T, m *Metrics) map[string]float64 {
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != Namespace+"_webhook_attempts_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			out[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	return out
}
