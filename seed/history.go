package seed

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// Devices are the demo devices of the alarm and telemetry history. Their ids
// have the shape of the audit events' device resources.
var Devices = []string{"device-0007", "device-0042", "device-0113", "device-0256"}

// newRand returns the generators' PRNG for seed.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// randomUUID returns a version 4 UUID drawn from rng, so that a generator's
// ids are deterministic too.
func randomUUID(rng *rand.Rand) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[:8], rng.Uint64())
	binary.BigEndian.PutUint64(u[8:], rng.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// span returns end-start, or zero when end is not after start.
func span(start, end time.Time) time.Duration {
	return max(end.Sub(start), 0)
}

// lifecycle is the entries an alarm goes through.
type lifecycle uint8

const (
	// lifecycleOpen: raised, not yet acknowledged.
	lifecycleOpen lifecycle = iota
	// lifecycleAcknowledged: raised and acknowledged, not yet cleared.
	lifecycleAcknowledged
	// lifecycleTransient: raised, then cleared by the device without an
	// acknowledgement.
	lifecycleTransient
	// lifecycleFull: raised, acknowledged, cleared.
	lifecycleFull
)

// entries is the number of history entries of the lifecycle.
func (l lifecycle) entries() int {
	switch l {
	case lifecycleOpen:
		return 1
	case lifecycleFull:
		return 3
	default:
		return 2
	}
}

// alarmKind is a kind of demo alarm: what it watches and how it reads.
type alarmKind struct {
	kind   string
	metric string
	unit   string
	// threshold, and the range of the value that raises the alarm.
	threshold, low, high float64
	// severities the alarm is raised with, drawn uniformly.
	severities []domain.AlarmSeverity
	raised     string // format of the RAISED message: value, threshold
	cleared    string // format of the CLEARED message: value
}

var alarmKinds = []alarmKind{
	{"high_temperature", "temperature", "°C", 30, 30.2, 38, []domain.AlarmSeverity{domain.AlarmMajor, domain.AlarmMajor, domain.AlarmCritical},
		"Temperature %.1f °C above threshold %g °C", "Temperature back to %.1f °C"},
	{"low_temperature", "temperature", "°C", 5, -2, 4.8, []domain.AlarmSeverity{domain.AlarmMinor, domain.AlarmMajor},
		"Temperature %.1f °C below threshold %g °C", "Temperature back to %.1f °C"},
	{"high_humidity", "humidity", "%", 70, 70.5, 92, []domain.AlarmSeverity{domain.AlarmWarning, domain.AlarmMinor},
		"Relative humidity %.0f %% above threshold %g %%", "Relative humidity back to %.0f %%"},
	{"low_battery", "voltage", "V", 3.3, 3.05, 3.29, []domain.AlarmSeverity{domain.AlarmWarning, domain.AlarmWarning, domain.AlarmMinor},
		"Battery voltage %.2f V below threshold %g V", "Battery voltage back to %.2f V"},
	{"device_offline", "heartbeat", "min", 5, 5, 8, []domain.AlarmSeverity{domain.AlarmMajor, domain.AlarmCritical},
		"No heartbeat for %.0f min (threshold %g min)", "Heartbeat received, offline for %.0f min"},
	{"firmware_update_available", "", "", 0, 0, 0, []domain.AlarmSeverity{domain.AlarmInfo},
		"Firmware 1.5.0 is available", "Firmware updated to 1.5.0"},
}

// AlarmGenerator makes demo alarm history: alarms of a few devices, spread
// evenly over a time span, each RAISED and then, mostly, ACKNOWLEDGED by a
// person and CLEARED (some clear on their own, a few are still open). Every
// entry falls in [start, end]; an alarm's entries come in order and share
// its id, device and severity. It is deterministic for a given seed, ids
// included, and its output does not depend on how it is batched.
type AlarmGenerator struct {
	rng        *rand.Rand
	start, end time.Time
	plan       []lifecycle // of each alarm, in raise order
	spacing    time.Duration
	next       int                  // index in plan of the next alarm
	pending    []domain.AlarmRecord // the rest of the current alarm's entries
	remaining  int
}

// NewAlarmGenerator returns a generator of exactly total alarm history
// entries in [start, end].
func NewAlarmGenerator(seed uint64, start, end time.Time, total int) *AlarmGenerator {
	g := &AlarmGenerator{rng: newRand(seed), start: start, end: start.Add(span(start, end)), remaining: max(total, 0)}
	for left := g.remaining; left > 0; {
		var l lifecycle
		switch r := g.rng.Float64(); {
		case r < 0.72:
			l = lifecycleFull
		case r < 0.90:
			l = lifecycleTransient
		case r < 0.96:
			l = lifecycleAcknowledged
		default:
			l = lifecycleOpen
		}
		if l.entries() > left {
			// The last alarm gets what is left: raised, maybe acknowledged.
			l = lifecycleOpen
			if left == 2 {
				l = lifecycleAcknowledged
			}
		}
		g.plan = append(g.plan, l)
		left -= l.entries()
	}
	if len(g.plan) > 0 {
		g.spacing = span(start, end) / time.Duration(len(g.plan))
	}
	return g
}

// Remaining is the number of entries still to come.
func (g *AlarmGenerator) Remaining() int { return g.remaining }

// Entries returns the next n entries, fewer (or none) when the generator
// has fewer left.
func (g *AlarmGenerator) Entries(n int) []domain.AlarmRecord {
	n = min(max(n, 0), g.remaining)
	out := make([]domain.AlarmRecord, 0, n)
	for len(out) < n {
		if len(g.pending) == 0 {
			g.pending = g.alarm(g.next)
			g.next++
		}
		k := min(n-len(out), len(g.pending))
		out = append(out, g.pending[:k]...)
		g.pending = g.pending[k:]
	}
	g.remaining -= n
	return out
}

// alarm returns the entries of the i-th alarm of the plan.
func (g *AlarmGenerator) alarm(i int) []domain.AlarmRecord {
	kind := alarmKinds[g.rng.IntN(len(alarmKinds))]
	severity := kind.severities[g.rng.IntN(len(kind.severities))]
	device := Devices[g.rng.IntN(len(Devices))]
	alarmID := fmt.Sprintf("alarm-%016x", g.rng.Uint64())
	raisedAt := g.start.Add(time.Duration(i)*g.spacing + g.jitter(g.spacing/2))
	value := kind.low + g.rng.Float64()*(kind.high-kind.low)

	base := map[string]any{"type": kind.kind}
	if kind.metric != "" {
		base["metric"], base["unit"], base["threshold"], base["value"] = kind.metric, kind.unit, kind.threshold, round(value, 2)
	}
	entry := func(at time.Time, state domain.AlarmState, message string, extra map[string]any) domain.AlarmRecord {
		details := make(map[string]any, len(base)+len(extra))
		for k, v := range base {
			details[k] = v
		}
		for k, v := range extra {
			details[k] = v
		}
		raw, _ := json.Marshal(details)
		return domain.AlarmRecord{ID: randomUUID(g.rng), OccurredAt: at.Truncate(time.Millisecond), AlarmID: alarmID,
			DeviceID: device, Severity: severity, State: state, Message: message, Details: raw}
	}
	raisedMsg := kind.raised
	if kind.metric != "" {
		raisedMsg = fmt.Sprintf(kind.raised, value, kind.threshold)
	}
	out := []domain.AlarmRecord{entry(raisedAt, domain.AlarmRaised, raisedMsg, nil)}

	at := raisedAt
	l := g.plan[i]
	if l == lifecycleAcknowledged || l == lifecycleFull {
		at = g.after(at, time.Minute, 20*time.Minute)
		p := g.rng.IntN(len(people))
		out = append(out, entry(at, domain.AlarmAcknowledged, "Acknowledged by "+people[p],
			map[string]any{"acknowledgedBy": fmt.Sprintf("user-%02d", p)}))
	}
	if l == lifecycleTransient || l == lifecycleFull {
		at = g.after(at, 2*time.Minute, 90*time.Minute)
		msg := kind.cleared
		if kind.metric != "" {
			back := kind.threshold - (kind.high-kind.low)*0.2*(0.5+g.rng.Float64())
			if kind.low < kind.threshold && kind.high <= kind.threshold { // a low-value alarm clears above
				back = kind.threshold + (kind.high-kind.low)*0.2*(0.5+g.rng.Float64())
			}
			if kind.metric == "heartbeat" {
				back = value + at.Sub(raisedAt).Minutes()
			}
			msg = fmt.Sprintf(kind.cleared, back)
		}
		if l == lifecycleTransient {
			msg += " (cleared automatically)"
		}
		out = append(out, entry(at, domain.AlarmCleared, msg, nil))
	}
	return out
}

// after returns a time a realistic delay (between lo and hi) after t, but
// shortened, when the span's end is nearer, to stay within it.
func (g *AlarmGenerator) after(t time.Time, lo, hi time.Duration) time.Time {
	d := lo + g.jitter(hi-lo)
	if room := g.end.Sub(t); d > room {
		d = time.Duration(float64(max(room, 0)) * (0.3 + 0.6*g.rng.Float64()))
	}
	return t.Add(d)
}

// jitter returns a random duration in [0, d), or zero.
func (g *AlarmGenerator) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(g.rng.Int64N(int64(d)))
}

// metricSpec is a kind of demo measurement.
type metricSpec struct {
	name     string
	unit     string
	decimals int
}

// Metrics are the demo telemetry metrics, measured by every device.
var Metrics = []string{"temperature", "humidity", "voltage"}

var metricSpecs = map[string]metricSpec{
	"temperature": {"temperature", "°C", 2},
	"humidity":    {"humidity", "%", 1},
	"voltage":     {"voltage", "V", 3},
}

// series is the state of one device's metric.
type series struct {
	device string
	metric metricSpec
	base   float64 // the device's typical value
	noise  float64 // AR(1) deviation from the typical value
}

// TelemetryGenerator makes demo telemetry: every device of Devices measures
// every metric of Metrics at regular intervals over a time span, with
// plausible values (a daily temperature cycle, humidity moving against it,
// a slowly draining battery) and units. At each tick it yields one point per
// device and metric. It is deterministic for a given seed, and its output
// does not depend on how it is batched.
type TelemetryGenerator struct {
	rng       *rand.Rand
	start     time.Time
	interval  time.Duration
	ticks     int
	series    []series
	tick, idx int // position of the next point
	remaining int
}

// NewTelemetryGenerator returns a generator of exactly total points over
// [start, end): the span is divided into regular intervals, as many as it
// takes to hold total points. Intervals are at least a microsecond, the
// resolution of stored times, so points run past end when the span is too
// short for that.
func NewTelemetryGenerator(seed uint64, start, end time.Time, total int) *TelemetryGenerator {
	g := &TelemetryGenerator{rng: newRand(seed), start: start, remaining: max(total, 0)}
	for _, d := range Devices {
		for _, m := range Metrics {
			s := series{device: d, metric: metricSpecs[m]}
			switch m {
			case "temperature":
				s.base = 19 + 5*g.rng.Float64()
			case "humidity":
				s.base = 38 + 17*g.rng.Float64()
			case "voltage":
				s.base = 3.55 + 0.15*g.rng.Float64()
			}
			g.series = append(g.series, s)
		}
	}
	g.ticks = (g.remaining + len(g.series) - 1) / len(g.series)
	if g.ticks > 0 {
		g.interval = span(start, end) / time.Duration(g.ticks)
		if g.interval >= time.Second {
			g.interval = g.interval.Truncate(time.Second)
		} else if g.interval >= time.Millisecond {
			g.interval = g.interval.Truncate(time.Millisecond)
		}
		// Stored times have microseconds: points of a series must differ.
		g.interval = max(g.interval.Truncate(time.Microsecond), time.Microsecond)
	}
	return g
}

// Interval is the time between two points of one device and metric.
func (g *TelemetryGenerator) Interval() time.Duration { return g.interval }

// Remaining is the number of points still to come.
func (g *TelemetryGenerator) Remaining() int { return g.remaining }

// Points returns the next n points, fewer (or none) when the generator has
// fewer left.
func (g *TelemetryGenerator) Points(n int) []domain.TelemetryPoint {
	n = min(max(n, 0), g.remaining)
	out := make([]domain.TelemetryPoint, n)
	for i := range out {
		out[i] = g.point()
	}
	g.remaining -= n
	return out
}

func (g *TelemetryGenerator) point() domain.TelemetryPoint {
	at := g.start.Add(time.Duration(g.tick) * g.interval)
	s := &g.series[g.idx]
	// Hour of day in [0, 24): the temperature peaks mid-afternoon.
	hour := float64(at.UTC().Hour()) + float64(at.UTC().Minute())/60
	daily := math.Sin(2 * math.Pi * (hour - 9) / 24)
	var v float64
	switch s.metric.name {
	case "temperature":
		s.noise = 0.9*s.noise + 0.15*g.rng.NormFloat64()
		v = s.base + 2.5*daily + s.noise
	case "humidity":
		s.noise = 0.9*s.noise + 0.6*g.rng.NormFloat64()
		v = min(max(s.base-6*daily+s.noise, 5), 98)
	case "voltage":
		s.noise = 0.5*s.noise + 0.004*g.rng.NormFloat64()
		// The battery drains by about 0.15 V over the span.
		drain := 0.15 * float64(g.tick) / float64(max(g.ticks, 1))
		v = min(max(s.base-drain+s.noise, 3.0), 3.75)
	}
	p := domain.TelemetryPoint{DeviceID: s.device, Metric: s.metric.name, OccurredAt: at,
		Value: round(v, s.metric.decimals), Unit: s.metric.unit}
	if g.idx++; g.idx == len(g.series) {
		g.idx = 0
		g.tick++
	}
	return p
}

// round rounds v to decimals places.
func round(v float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(v*p) / p
}
