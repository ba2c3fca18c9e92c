package seed

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

var (
	spanStart = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	spanEnd   = spanStart.Add(6 * time.Hour)
)

// drainAlarms takes every entry of g in batches of batch.
func drainAlarms(g *AlarmGenerator, batch int) []domain.AlarmRecord {
	var out []domain.AlarmRecord
	for g.Remaining() > 0 {
		out = append(out, g.Entries(batch)...)
	}
	return out
}

// drainTelemetry takes every point of g in batches of batch.
func drainTelemetry(g *TelemetryGenerator, batch int) []domain.TelemetryPoint {
	var out []domain.TelemetryPoint
	for g.Remaining() > 0 {
		out = append(out, g.Points(batch)...)
	}
	return out
}

func TestAlarmGeneratorDeterministic(t *testing.T) {
	a := drainAlarms(NewAlarmGenerator(42, spanStart, spanEnd, 1000), 5000)
	b := drainAlarms(NewAlarmGenerator(42, spanStart, spanEnd, 1000), 7)
	require.Len(t, a, 1000)
	require.Equal(t, a, b, "same seed, other batching")

	c := drainAlarms(NewAlarmGenerator(43, spanStart, spanEnd, 1000), 5000)
	require.NotEqual(t, a, c, "another seed")
}

func TestAlarmGeneratorLifecycles(t *testing.T) {
	for _, total := range []int{0, 1, 2, 3, 4, 5, 100, 2345} {
		g := NewAlarmGenerator(7, spanStart, spanEnd, total)
		entries := drainAlarms(g, 500)
		require.Len(t, entries, total)
		require.Empty(t, g.Entries(10), "past the end")

		ids := map[uuid.UUID]bool{}
		byAlarm := map[string][]domain.AlarmRecord{}
		var order []string
		for _, e := range entries {
			require.NotEqual(t, uuid.Nil, e.ID)
			require.False(t, ids[e.ID], "duplicate id %s", e.ID)
			ids[e.ID] = true
			require.False(t, e.OccurredAt.Before(spanStart) || e.OccurredAt.After(spanEnd), "time %s out of span", e.OccurredAt)
			require.Contains(t, Devices, e.DeviceID)
			require.Contains(t, []domain.AlarmSeverity{domain.AlarmCritical, domain.AlarmMajor, domain.AlarmMinor,
				domain.AlarmWarning, domain.AlarmInfo}, e.Severity)
			require.NotEmpty(t, e.Message)
			require.LessOrEqual(t, len(e.Message), 1024)
			var details map[string]any
			require.NoError(t, json.Unmarshal(e.Details, &details))
			require.NotEmpty(t, details["type"])
			if _, seen := byAlarm[e.AlarmID]; !seen {
				order = append(order, e.AlarmID)
			}
			byAlarm[e.AlarmID] = append(byAlarm[e.AlarmID], e)
		}

		// Each alarm's entries are contiguous, in lifecycle order and in
		// time order, and keep the alarm's device and severity.
		var flat []domain.AlarmRecord
		for _, id := range order {
			flat = append(flat, byAlarm[id]...)
		}
		require.Equal(t, entries, flat, "an alarm's entries are contiguous")
		states := map[string]int{}
		for _, id := range order {
			seq := byAlarm[id]
			var got []domain.AlarmState
			for i, e := range seq {
				got = append(got, e.State)
				states[string(e.State)]++
				require.Equal(t, seq[0].DeviceID, e.DeviceID)
				require.Equal(t, seq[0].Severity, e.Severity)
				if i > 0 {
					require.False(t, e.OccurredAt.Before(seq[i-1].OccurredAt), "alarm %s goes back in time", id)
				}
			}
			require.Contains(t, [][]domain.AlarmState{
				{domain.AlarmRaised},
				{domain.AlarmRaised, domain.AlarmAcknowledged},
				{domain.AlarmRaised, domain.AlarmCleared},
				{domain.AlarmRaised, domain.AlarmAcknowledged, domain.AlarmCleared},
			}, got, "alarm %s", id)
		}
		if total >= 1000 {
			// Mostly full lifecycles; every state and several alarms per device.
			require.Greater(t, states["CLEARED"], states["RAISED"]*3/4, "states %v", states)
			require.Greater(t, states["ACKNOWLEDGED"], states["RAISED"]/2, "states %v", states)
			require.Greater(t, len(order), total/3)
		}
	}
}

func TestAlarmGeneratorSpreadsOverTheSpan(t *testing.T) {
	entries := drainAlarms(NewAlarmGenerator(1, spanStart, spanEnd, 3000), 5000)
	var first, last time.Time
	for _, e := range entries {
		if first.IsZero() || e.OccurredAt.Before(first) {
			first = e.OccurredAt
		}
		if e.OccurredAt.After(last) {
			last = e.OccurredAt
		}
	}
	require.Less(t, first.Sub(spanStart), 10*time.Minute)
	require.Less(t, spanEnd.Sub(last), 10*time.Minute)

	// An empty span puts everything at its start.
	entries = drainAlarms(NewAlarmGenerator(1, spanStart, spanStart, 10), 5000)
	require.Len(t, entries, 10)
	for _, e := range entries {
		require.Equal(t, spanStart, e.OccurredAt)
	}
}

func TestTelemetryGeneratorDeterministic(t *testing.T) {
	a := drainTelemetry(NewTelemetryGenerator(42, spanStart, spanEnd, 1000), 5000)
	b := drainTelemetry(NewTelemetryGenerator(42, spanStart, spanEnd, 1000), 13)
	require.Len(t, a, 1000)
	require.Equal(t, a, b, "same seed, other batching")
	c := drainTelemetry(NewTelemetryGenerator(43, spanStart, spanEnd, 1000), 5000)
	require.NotEqual(t, a, c, "another seed")
}

func TestTelemetryGeneratorSeries(t *testing.T) {
	for _, total := range []int{0, 1, 11, 12, 13, 100, 10000} {
		g := NewTelemetryGenerator(9, spanStart, spanEnd, total)
		points := drainTelemetry(g, 1000)
		require.Len(t, points, total)
		require.Empty(t, g.Points(10), "past the end")

		type key struct{ device, metric string }
		bySeries := map[key][]domain.TelemetryPoint{}
		seen := map[string]bool{}
		for _, p := range points {
			require.Contains(t, Devices, p.DeviceID)
			require.Contains(t, Metrics, p.Metric)
			require.False(t, math.IsNaN(p.Value) || math.IsInf(p.Value, 0))
			require.True(t, !p.OccurredAt.Before(spanStart) && p.OccurredAt.Before(spanEnd), "time %s out of span", p.OccurredAt)
			switch p.Metric {
			case "temperature":
				require.Equal(t, "°C", p.Unit)
				require.InDelta(t, 21.5, p.Value, 8, "temperature")
			case "humidity":
				require.Equal(t, "%", p.Unit)
				require.InDelta(t, 50, p.Value, 48, "humidity")
			case "voltage":
				require.Equal(t, "V", p.Unit)
				require.True(t, p.Value >= 3.0 && p.Value <= 3.75, "voltage %v", p.Value)
			}
			k := p.OccurredAt.Format(time.RFC3339Nano) + "|" + p.DeviceID + "|" + p.Metric
			require.False(t, seen[k], "duplicate point %s", k)
			seen[k] = true
			bySeries[key{p.DeviceID, p.Metric}] = append(bySeries[key{p.DeviceID, p.Metric}], p)
		}
		if total >= len(Devices)*len(Metrics) {
			require.Len(t, bySeries, len(Devices)*len(Metrics), "every device measures every metric")
		}
		// Regular intervals within each series.
		for k, s := range bySeries {
			for i := 1; i < len(s); i++ {
				require.Equal(t, g.Interval(), s[i].OccurredAt.Sub(s[i-1].OccurredAt), "series %v", k)
			}
		}
	}
}

func TestTelemetryGeneratorIntervals(t *testing.T) {
	// 12 series, 120 points: 10 ticks over 6h, every 36 minutes.
	g := NewTelemetryGenerator(1, spanStart, spanEnd, 120)
	require.Equal(t, 36*time.Minute, g.Interval())
	// Intervals of a second or more are whole seconds.
	g = NewTelemetryGenerator(1, spanStart, spanStart.Add(time.Hour), 12*7)
	require.Equal(t, (time.Hour / 7).Truncate(time.Second), g.Interval())
	// Many points over a short span still get distinct times.
	g = NewTelemetryGenerator(1, spanStart, spanStart.Add(time.Millisecond), 12*5000)
	require.Equal(t, time.Microsecond, g.Interval())

	// The battery drains: the last voltage of a series is below its first.
	points := drainTelemetry(NewTelemetryGenerator(3, spanStart, spanEnd, 12*500), 5000)
	first, last := map[string]float64{}, map[string]float64{}
	for _, p := range points {
		if p.Metric != "voltage" {
			continue
		}
		if _, ok := first[p.DeviceID]; !ok {
			first[p.DeviceID] = p.Value
		}
		last[p.DeviceID] = p.Value
	}
	require.Len(t, first, len(Devices))
	for d := range first {
		require.Less(t, last[d], first[d], "device %s", d)
	}
	require.True(t, slices.IsSortedFunc(points, func(a, b domain.TelemetryPoint) int {
		return a.OccurredAt.Compare(b.OccurredAt)
	}), "points come in time order")
}
