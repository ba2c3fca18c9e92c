package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"sync"
	"time"
)

// sliceLength is the target length of one interleaved measurement slice:
// ours and the baseline take turns in slices about this long, so that
// noise on the machine (other processes, checkpoints, autovacuum) hits
// both sides alike.
const sliceLength = 2 * time.Second

// maxRounds bounds the number of slices per side.
const maxRounds = 10

// side is one contender of a scenario: ours or the baseline.
type side struct {
	// label names the side in CPU profiles (pprof label "side").
	label string
	// workers are the concurrent clients; each runs op in a loop. They
	// persist across slices, so per-worker state carries over.
	workers []*worker
	// op performs one operation for w and returns how many units (events,
	// pages) it processed.
	op func(ctx context.Context, w *worker) (units int, err error)
}

// newSide returns a side with n workers running op.
func newSide(label string, n int, op func(ctx context.Context, w *worker) (int, error)) *side {
	s := &side{label: label, op: op}
	for i := range n {
		s.workers = append(s.workers, &worker{
			id:  i,
			rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano()))),
		})
	}
	return s
}

// worker is the state of one concurrent client of a side.
type worker struct {
	// id numbers the workers of a side from 0.
	id int
	// n counts the operations this worker has completed so far.
	n int
	// rng is the worker's own random source.
	rng *rand.Rand
	// buf is a scratch buffer the op may reuse between operations.
	buf bytes.Buffer
}

// measurement is what one side achieved over one or more slices.
type measurement struct {
	// units processed (events or pages) and operations completed.
	units, ops int64
	// elapsed is the wall time the side ran, summed over slices.
	elapsed time.Duration
	// latencies holds the duration of every operation.
	latencies []time.Duration
}

// rate returns units per second.
func (m measurement) rate() float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.units) / m.elapsed.Seconds()
}

// percentile returns the q-quantile (0 < q <= 1) of the operation
// latencies, nearest rank.
func (m measurement) percentile(q float64) time.Duration {
	if len(m.latencies) == 0 {
		return 0
	}
	s := slices.Clone(m.latencies)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// add merges o into m.
func (m *measurement) add(o measurement) {
	m.units += o.units
	m.ops += o.ops
	m.elapsed += o.elapsed
	m.latencies = append(m.latencies, o.latencies...)
}

// compare measures ours and base for d each, interleaved: after a short
// warm-up of each (not counted), the sides alternate in rounds of about
// sliceLength, the order swapping every round (ours first, then baseline
// first, ...), so that drift in the machine's load cancels out.
func compare(ctx context.Context, scenario string, d time.Duration, ours, base *side) (o, b measurement, err error) {
	warm := min(max(d/10, 300*time.Millisecond), time.Second)
	for _, s := range []*side{ours, base} {
		if _, err := runSlice(ctx, scenario, s, warm); err != nil {
			return o, b, fmt.Errorf("%s warm-up: %w", s.label, err)
		}
	}
	rounds := int(min(maxRounds, max(1, (d+sliceLength/2)/sliceLength)))
	slice := d / time.Duration(rounds)
	for r := range rounds {
		order := []*side{ours, base}
		if r%2 == 1 {
			order = []*side{base, ours}
		}
		for _, s := range order {
			m, err := runSlice(ctx, scenario, s, slice)
			if err != nil {
				return o, b, fmt.Errorf("%s: %w", s.label, err)
			}
			if s == ours {
				o.add(m)
			} else {
				b.add(m)
			}
		}
	}
	return o, b, nil
}

// runSlice runs every worker of s concurrently until d has passed and
// returns what they achieved. Operations in flight at the deadline finish
// and count; elapsed is measured until the last one returns. The first
// error stops the slice.
func runSlice(ctx context.Context, scenario string, s *side, d time.Duration) (measurement, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	per := make([]measurement, len(s.workers))
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i, w := range s.workers {
		wg.Go(func() {
			pprof.Do(ctx, pprof.Labels("side", s.label, "scenario", scenario), func(ctx context.Context) {
				m := &per[i]
				for ctx.Err() == nil && time.Now().Before(deadline) {
					t0 := time.Now()
					units, err := s.op(ctx, w)
					if err != nil {
						cancel(err)
						return
					}
					m.latencies = append(m.latencies, time.Since(t0))
					m.units += int64(units)
					m.ops++
					w.n++
				}
			})
		})
	}
	wg.Wait()
	total := measurement{elapsed: time.Since(start)}
	if err := context.Cause(ctx); err != nil {
		return total, err
	}
	for _, m := range per {
		total.units += m.units
		total.ops += m.ops
		total.latencies = append(total.latencies, m.latencies...)
	}
	return total, nil
}

// result is the outcome of one scenario: one JSON line with -json, rows of
// the table otherwise.
type result struct {
	Scenario string   `json:"scenario"`
	Metrics  []metric `json:"metrics"`
	// OursOps and BaselineOps count the measured operations of each side.
	OursOps     int64 `json:"ours_ops"`
	BaselineOps int64 `json:"baseline_ops"`
	// Seconds is the measured time of each side.
	Seconds float64 `json:"seconds"`
	// Note says what exactly each side does.
	Note string `json:"note"`
}

// metric is one compared figure of a scenario.
type metric struct {
	Name     string  `json:"metric"`
	Ours     float64 `json:"ours"`
	Baseline float64 `json:"baseline"`
	// Ratio is ours divided by baseline.
	Ratio float64 `json:"ratio"`
	// Target is the condition on Ratio, "" for an informational metric.
	Target string `json:"target,omitempty"`
	// Pass reports whether Ratio meets Target; absent without a target.
	Pass *bool `json:"pass,omitempty"`
}

// newResult returns the result of scenario from the two measurements.
func newResult(scenario string, o, b measurement, note string, metrics ...metric) result {
	return result{
		Scenario:    scenario,
		Metrics:     metrics,
		OursOps:     o.ops,
		BaselineOps: b.ops,
		Seconds:     math.Round(o.elapsed.Seconds()*10) / 10,
		Note:        note,
	}
}

// throughput compares units per second; higher is better. With minRatio
// > 0 the metric passes when ours/baseline >= minRatio.
func throughput(name string, o, b measurement, minRatio float64) metric {
	m := metric{Name: name, Ours: round(o.rate(), 1), Baseline: round(b.rate(), 1), Ratio: ratio(o.rate(), b.rate())}
	if minRatio > 0 {
		pass := m.Ratio >= minRatio
		m.Target, m.Pass = fmt.Sprintf(">= %.2f", minRatio), &pass
	}
	return m
}

// latency compares the q-quantile of operation latency in milliseconds;
// lower is better. With maxRatio > 0 the metric passes when
// ours/baseline <= maxRatio.
func latency(name string, q float64, o, b measurement, maxRatio float64) metric {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ov, bv := ms(o.percentile(q)), ms(b.percentile(q))
	m := metric{Name: name, Ours: round(ov, 3), Baseline: round(bv, 3), Ratio: ratio(ov, bv)}
	if maxRatio > 0 {
		pass := m.Ratio <= maxRatio
		m.Target, m.Pass = fmt.Sprintf("<= %.2f", maxRatio), &pass
	}
	return m
}

// ratio returns a/b rounded to three decimals, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}

// round rounds v to the given number of decimals.
func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}
