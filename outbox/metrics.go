package outbox

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus metrics.
type metrics struct {
	leader     prometheus.Gauge
	backlog    prometheus.Gauge
	parked     prometheus.Gauge
	oldestAge  prometheus.Gauge
	lag        prometheus.Histogram
	shipped    prometheus.Counter
	parkedAll  prometheus.Counter
	sendErrors prometheus.Counter
}

// newMetrics creates the metrics and registers them with reg (none when
// nil).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_outbox_relay_leader",
			Help: "1 while this relay holds the outbox's lock and ships, 0 while it waits as a standby."}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_outbox_backlog",
			Help: "Rows in the outbox waiting to be shipped (parked rows excluded), at the last count."}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_outbox_parked",
			Help: "Rows in the outbox that Aether refused and that wait for an operator, at the last count."}),
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_outbox_oldest_age_seconds",
			Help: "Age of the oldest row waiting to be shipped (0 when none), at the last count."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "aether_outbox_lag_seconds",
			Help:    "Time from an event's row being written to Aether confirming it.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		shipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_outbox_shipped_total",
			Help: "Events Aether confirmed and the relay deleted from the outbox."}),
		parkedAll: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_outbox_parked_total",
			Help: "Events the relay parked because Aether refused them (BAD_USER_INPUT, IDEMPOTENCY_CONFLICT)."}),
		sendErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_outbox_send_errors_total",
			Help: "Batches that failed to reach Aether after the client's retries, and were sent again later."}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.backlog, m.parked, m.oldestAge, m.lag, m.shipped, m.parkedAll, m.sendErrors)
	}
	return m
}
