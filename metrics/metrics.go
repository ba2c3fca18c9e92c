// Package metrics holds Aether Audit's Prometheus metrics: one registry per
// process with the Go and process collectors, the HTTP and GraphQL request
// metrics the server records, the live hub's subscribers and fan-out lag,
// the River queue depth read at scrape time, and the webhook and export
// measurements of the use cases (it implements app.Observer and
// live.Observer). Label values are bounded: routes are patterns, never raw
// paths, and GraphQL operation names collapse to "other" past a limit.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of the service.
const Namespace = "aether"

// Operation name labels: the name of an anonymous GraphQL operation, and the
// one every name collapses to once MaxOperationNames distinct names were
// seen (or a name longer than MaxOperationNameLength).
const (
	OperationAnonymous = "anonymous"
	OperationOther     = "other"
	// MaxOperationNames bounds the distinct operation names of the GraphQL
	// metrics.
	MaxOperationNames = 200
	// MaxOperationNameLength bounds one operation name label.
	MaxOperationNameLength = 64
)

// Metrics is the service's metric set and the registry that exposes it.
// Create it with New; its methods are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	logger   *slog.Logger

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	graphqlOperations *prometheus.CounterVec
	graphqlDuration   *prometheus.HistogramVec
	namesMu           sync.RWMutex
	names             map[string]struct{}

	liveLag prometheus.Histogram

	webhookAttempts *prometheus.CounterVec
	// attemptsBy has webhookAttempts' counter of each outcome that ends
	// attempts, bound once: WithLabelValues per attempt hashed the label
	// and looked its series up under a lock each time. Read-only after New.
	attemptsBy map[string]prometheus.Counter
	webhookLag prometheus.Histogram

	exportDuration *prometheus.HistogramVec
	exportBytes    *prometheus.HistogramVec
	checkpoints    *prometheus.CounterVec
}

// New returns the metric set registered in a fresh registry, with the Go
// runtime and process collectors.
func New(logger *slog.Logger) *Metrics {
	if logger == nil {
		logger = slog.Default()
	}
	m := &Metrics{registry: prometheus.NewRegistry(), logger: logger, names: map[string]struct{}{}}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	lag := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400}

	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by method, route pattern and status code.",
	}, []string{"method", "route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds",
		Help:    "Time from receiving an HTTP request to the end of its handler, by method and route pattern (for streams and WebSockets, their lifetime).",
		Buckets: latency,
	}, []string{"method", "route"})
	m.graphqlOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "graphql_operations_total",
		Help: "GraphQL operations executed, by operation type, name and outcome (ok or error); a subscription counts once, when it starts.",
	}, []string{"type", "name", "outcome"})
	m.graphqlDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "graphql_operation_duration_seconds",
		Help:    "Time to execute a GraphQL query or mutation, by operation type and name.",
		Buckets: latency,
	}, []string{"type", "name"})
	m.liveLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "live_fanout_lag_seconds",
		Help:    "Time from an audit event's recording (its commit) to the live hub's fan-out of it to this process's subscribers.",
		Buckets: lag,
	})
	m.webhookAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "webhook_attempts_total",
		Help: "Webhook delivery attempts finished, by outcome: succeeded, failed or unknown.",
	}, []string{"outcome"})
	m.attemptsBy = map[string]prometheus.Counter{}
	for _, outcome := range []string{"succeeded", "failed", "unknown"} {
		m.attemptsBy[outcome] = m.webhookAttempts.WithLabelValues(outcome)
	}
	m.webhookLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "webhook_delivery_lag_seconds",
		Help:    "Time from an audit event's recording to its successful delivery to a webhook destination.",
		Buckets: lag,
	})
	m.exportDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "export_duration_seconds",
		Help:    "Duration of data export runs, by kind and outcome (ready, failed, or error for a run River retries).",
		Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"kind", "outcome"})
	m.exportBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "export_bytes",
		Help:    "Size of the objects of data exports that became ready, in bytes after compression, by kind.",
		Buckets: prometheus.ExponentialBuckets(1024, 4, 12), // 1 KiB .. 4 GiB
	}, []string{"kind"})
	m.checkpoints = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "checkpoints_total",
		Help: "Audit checkpoint signings, by outcome: signed, or refused because the chain did not recompute (investigate at once).",
	}, []string{"outcome"})
	m.registry.MustRegister(m.httpRequests, m.httpDuration, m.graphqlOperations, m.graphqlDuration, m.liveLag,
		m.webhookAttempts, m.webhookLag, m.exportDuration, m.exportBytes, m.checkpoints)
	return m
}

// Registry returns the registry holding every metric, for tests and for
// registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// HTTPRequest records one answered HTTP request. route must be the matched
// route pattern (or a fixed placeholder), never the raw path.
func (m *Metrics) HTTPRequest(method, route string, code int, took time.Duration) {
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(took.Seconds())
}

// GraphQLOperation records one executed GraphQL query or mutation (took > 0)
// or one started subscription (took is ignored). kind is query, mutation or
// subscription; name is the operation's name, "" when anonymous.
func (m *Metrics) GraphQLOperation(kind, name string, failed bool, took time.Duration) {
	name = m.operationName(name)
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.graphqlOperations.WithLabelValues(kind, name, outcome).Inc()
	if kind != "subscription" {
		m.graphqlDuration.WithLabelValues(kind, name).Observe(took.Seconds())
	}
}

// operationName bounds the operation name label: the first
// MaxOperationNames distinct names are kept, later ones collapse to
// OperationOther.
func (m *Metrics) operationName(name string) string {
	switch {
	case name == "":
		return OperationAnonymous
	case len(name) > MaxOperationNameLength:
		return OperationOther
	}
	m.namesMu.RLock()
	_, known := m.names[name]
	full := len(m.names) >= MaxOperationNames
	m.namesMu.RUnlock()
	if known {
		return name
	}
	if full {
		return OperationOther
	}
	m.namesMu.Lock()
	defer m.namesMu.Unlock()
	if len(m.names) >= MaxOperationNames {
		return OperationOther
	}
	m.names[name] = struct{}{}
	return name
}

// FanoutLag implements live.Observer.
func (m *Metrics) FanoutLag(lag time.Duration) { m.liveLag.Observe(max(lag, 0).Seconds()) }

// WebhookAttempt implements app.Observer.
func (m *Metrics) WebhookAttempt(outcome string, deliveryLag time.Duration) {
	if c, ok := m.attemptsBy[outcome]; ok {
		c.Inc()
	} else {
		m.webhookAttempts.WithLabelValues(outcome).Inc()
	}
	if deliveryLag > 0 {
		m.webhookLag.Observe(deliveryLag.Seconds())
	}
}

// DataExportRun implements app.Observer.
func (m *Metrics) DataExportRun(kind, outcome string, took time.Duration, bytes uint64) {
	m.exportDuration.WithLabelValues(kind, outcome).Observe(took.Seconds())
	if outcome == "ready" {
		m.exportBytes.WithLabelValues(kind).Observe(float64(bytes))
	}
}

// CheckpointSigned implements app.Observer.
func (m *Metrics) CheckpointSigned(outcome string) { m.checkpoints.WithLabelValues(outcome).Inc() }

// ObserveLiveSubscribers exports subscribers() as the gauge of live
// subscriptions open in this process, read at scrape time.
func (m *Metrics) ObserveLiveSubscribers(subscribers func() int) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "live_subscribers",
		Help: "Live audit subscriptions (GraphQL subscriptions and live SSE streams) open in this process.",
	}, func() float64 { return float64(subscribers()) }))
}

// SetStoragePrivileged exports the gauge aether_storage_privileged: 1 when
// the service's database login can change history rather than only append
// to it (it is a superuser, bypasses row-level security, owns the evidence
// tables or was granted UPDATE, DELETE or TRUNCATE on them), else 0. serve
// checks once, at start, and calls it once.
func (m *Metrics) SetStoragePrivileged(privileged bool) {
	v := 0.0
	if privileged {
		v = 1
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "storage_privileged",
		Help: "1 when the service's database login can change or delete audit evidence (superuser, owner of the event tables, or granted UPDATE, DELETE or TRUNCATE on them): serve it as the runtime role (aether migrate --app-role). 0 when it can only append and read.",
	})
	g.Set(v)
	m.registry.MustRegister(g)
}

// JobCount is the number of River jobs of one queue, state and kind.
type JobCount struct {
	Queue, State, Kind string
	Count              int64
	// OldestScheduledAt is the earliest scheduled time among them.
	OldestScheduledAt time.Time
}

// ObserveJobs exports River's unfinished jobs, read by count at scrape time
// (bounded by timeout): the jobs gauge by queue and state, the outbox gauge
// by kind, and the age of the oldest available job per queue. A failed read
// is logged and leaves those metrics out of that scrape.
func (m *Metrics) ObserveJobs(count func(ctx context.Context) ([]JobCount, error), timeout time.Duration) {
	m.registry.MustRegister(&jobCollector{count: count, timeout: timeout, logger: m.logger, now: time.Now})
}

var (
	jobsDesc = prometheus.NewDesc(Namespace+"_river_jobs", "River jobs not yet finished, by queue and state (available, scheduled, retryable, running, pending): the queue depth.",
		[]string{"queue", "state"}, nil)
	outboxDesc = prometheus.NewDesc(Namespace+"_outbox_jobs", "Outbox work written by commands and not yet done (River jobs available, scheduled, retryable or running), by job kind.",
		[]string{"kind"}, nil)
	oldestDesc = prometheus.NewDesc(Namespace+"_river_oldest_available_seconds", "Age of the oldest job available to run (due, not yet picked up), by queue; 0 when none waits.",
		[]string{"queue"}, nil)
)

// jobCollector reads River's job table at scrape time.
type jobCollector struct {
	count   func(ctx context.Context) ([]JobCount, error)
	timeout time.Duration
	logger  *slog.Logger
	now     func() time.Time
}

// Describe implements prometheus.Collector.
func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- outboxDesc
	ch <- oldestDesc
}

// Collect implements prometheus.Collector.
func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		c.logger.Warn("metrics: counting river jobs", "err", err)
		return
	}
	jobs := map[[2]string]int64{}
	outbox := map[string]int64{}
	oldest := map[string]float64{}
	now := c.now()
	for _, jc := range counts {
		jobs[[2]string{jc.Queue, jc.State}] += jc.Count
		if jc.State != "pending" {
			outbox[jc.Kind] += jc.Count
		}
		if _, ok := oldest[jc.Queue]; !ok {
			oldest[jc.Queue] = 0
		}
		if jc.State == "available" {
			oldest[jc.Queue] = max(oldest[jc.Queue], now.Sub(jc.OldestScheduledAt).Seconds())
		}
	}
	for k, n := range jobs {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for kind, n := range outbox {
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(n), kind)
	}
	for queue, age := range oldest {
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, max(age, 0), queue)
	}
}

// StreamLag is one audit stream's lag in one project.
type StreamLag struct {
	TenantID, StreamID, ProjectID string
	// Events is head minus cursor; Seconds the age of the oldest event not
	// yet acknowledged (0 when caught up).
	Events  uint64
	Seconds float64
}

// ObserveStreams exports every audit stream's lag per project, read by
// read at scrape time (bounded by timeout): aether_stream_lag_events and
// aether_stream_lag_seconds, labelled tenant, stream and project. A failed
// read is logged and leaves them out of that scrape.
func (m *Metrics) ObserveStreams(read func(ctx context.Context) ([]StreamLag, error), timeout time.Duration) {
	m.registry.MustRegister(&streamCollector{read: read, timeout: timeout, logger: m.logger})
}

var (
	streamLagEventsDesc = prometheus.NewDesc(Namespace+"_stream_lag_events", "Events recorded and not yet acknowledged by an audit stream's sink (head minus cursor), by tenant, stream and project.",
		[]string{"tenant", "stream", "project"}, nil)
	streamLagSecondsDesc = prometheus.NewDesc(Namespace+"_stream_lag_seconds", "Age of the oldest event an audit stream's sink has not acknowledged, 0 when caught up, by tenant, stream and project.",
		[]string{"tenant", "stream", "project"}, nil)
)

// streamCollector reads the streams' cursors at scrape time.
type streamCollector struct {
	read    func(ctx context.Context) ([]StreamLag, error)
	timeout time.Duration
	logger  *slog.Logger
}

// Describe implements prometheus.Collector.
func (c *streamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- streamLagEventsDesc
	ch <- streamLagSecondsDesc
}

// Collect implements prometheus.Collector.
func (c *streamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	lags, err := c.read(ctx)
	if err != nil {
		c.logger.Warn("metrics: reading audit stream lag", "err", err)
		return
	}
	for _, l := range lags {
		ch <- prometheus.MustNewConstMetric(streamLagEventsDesc, prometheus.GaugeValue, float64(l.Events), l.TenantID, l.StreamID, l.ProjectID)
		ch <- prometheus.MustNewConstMetric(streamLagSecondsDesc, prometheus.GaugeValue, l.Seconds, l.TenantID, l.StreamID, l.ProjectID)
	}
}
