package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"
)

// whFloorRates are the event rates of the floor row: the trickle rows'
// rates, and 0 for a process that records nothing.
var whFloorRates = []int{0, 20, 200}

// floorRow measures what the trickle rows cost without webhooks (row
// "floor", not run by default): the River client and the webhook
// dispatcher running as in the lag rows, and single events recorded at each
// of whFloorRates into a project without subscriptions, for
// -webhook-lag-duration each after whLagWarm. It reports the CPU per event
// (bench process + PostgreSQL, as the lag rows count it) and, at 0 events/s,
// the CPU per second of an idle process: the part of the trickle rows'
// targets that no change to the webhook path can remove.
func (b *webhookBench) floorRow(ctx context.Context) (result, error) {
	project := "wh-floor-" + b.e.runID
	drafts := benchDrafts(300, project)
	b.configure(1)
	if err := b.maintain(ctx); err != nil {
		return result{}, err
	}
	stop, err := b.startRiver(ctx)
	if err != nil {
		return result{}, err
	}
	defer stop()
	var (
		metrics []metric
		events  int64
	)
	for _, rate := range whFloorRates {
		fmt.Fprintf(os.Stderr, "bench: webhook-delivery floor @%d/s: %s\n", rate, b.opts.webhookLagDuration)
		cpu, n, err := b.floorWindow(ctx, rate, func(ctx context.Context, i int64) error {
			d := drafts[int(i)%len(drafts)]
			d.OccurredAt = time.Now()
			_, err := b.app.RecordAuditEvent(ctx, b.id, d, "")
			return err
		})
		if err != nil {
			return result{}, fmt.Errorf("floor @%d/s: %w", rate, err)
		}
		events += n
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		if rate == 0 {
			per := func(d time.Duration) float64 { return round(ms(d)/b.opts.webhookLagDuration.Seconds(), 3) }
			metrics = append(metrics,
				metric{Name: "idle: bench process CPU ms/s", Ours: per(cpu.bench)},
				metric{Name: "idle: PostgreSQL CPU ms/s", Ours: per(cpu.pg)},
				metric{Name: "idle: of it the server's own processes", Ours: per(cpu.pgServer)})
			continue
		}
		cpu.deliveries = n
		metrics = append(metrics,
			metric{Name: fmt.Sprintf("@%d/s: CPU ms/event", rate), Ours: round(cpu.perDelivery(cpu.bench+cpu.pg), 3)},
			metric{Name: fmt.Sprintf("@%d/s: bench process ms/event", rate), Ours: round(cpu.perDelivery(cpu.bench), 3)},
			metric{Name: fmt.Sprintf("@%d/s: PostgreSQL ms/event", rate), Ours: round(cpu.perDelivery(cpu.pg), 3)},
			metric{Name: fmt.Sprintf("@%d/s: of it the server's own processes", rate), Ours: round(cpu.perDelivery(cpu.pgServer), 3)})
	}
	return result{Scenario: "webhook-delivery floor", Metrics: metrics, OursOps: events,
		Seconds: b.opts.webhookLagDuration.Seconds(),
		Note: fmt.Sprintf("no baseline: ours alone, River and the webhook dispatcher running as in the lag rows; "+
			"idle (no events), then app.RecordAuditEvent of single events at 20/s and 200/s into a project without "+
			"subscriptions, %s each after %s of warm-up; CPU = bench process + PostgreSQL in the window", b.opts.webhookLagDuration, whLagWarm)}, nil
}

// floorWindow calls record at rate calls/s (none at 0) for whLagWarm and
// then the measured window, and returns the CPU time of the window and the
// number of calls made in it.
func (b *webhookBench) floorWindow(ctx context.Context, rate int, record func(ctx context.Context, i int64) error) (whCPU, int64, error) {
	start := time.Now()
	t0 := start.Add(whLagWarm)
	t1 := t0.Add(b.opts.webhookLagDuration)
	waitCPU := meterWindow(ctx, t0, t1)
	if rate == 0 {
		cpu, err := waitCPU()
		return cpu, 0, err
	}
	var n atomic.Int64
	var sends []time.Duration
	var sendErr error
	pprof.Do(ctx, pprof.Labels("side", "server", "scenario", "webhook-delivery"), func(ctx context.Context) {
		sends, sendErr = pacedSends(ctx, start, t0, t1, time.Second/time.Duration(rate), func(ctx context.Context) (time.Time, error) {
			stamp := time.Now()
			return stamp, record(ctx, n.Add(1)-1)
		})
	})
	cpu, cpuErr := waitCPU()
	if err := errors.Join(sendErr, cpuErr, ctx.Err()); err != nil {
		return cpu, 0, err
	}
	return cpu, int64(len(sends)), nil
}
