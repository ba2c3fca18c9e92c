package main

// The "one destination down among 10" row of webhook-delivery: a project
// with 10 destinations, one of which refuses connections (a closed port on
// 127.0.0.1), against the same project shape with all 10 healthy, in the
// same run. Ours is the nine healthy destinations' deliveries per second
// and per destination with the tenth down; the baseline is the same with
// all ten healthy (target: ours >= 0.9 x the baseline). The second metric
// is the dead destination's cost once its circuit breaker opened: its
// requests per backoff period (target <= 1), against the deliveries that
// came due to it in that time (each would cost at least one request
// without a breaker).

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// whDownBackoff is the breaker's backoff in the down row, fixed (no
// doubling), so that the window holds many periods.
const whDownBackoff = time.Second

// whDownMinRatio is the target of the healthy destinations' throughput.
const whDownMinRatio = 0.9

// downRow runs the row: a warm-up, one down, then all healthy, each with
// events recorded while River runs.
func (b *webhookBench) downRow(ctx context.Context) (result, error) {
	const fanout = 10
	events := b.opts.webhookDeliveries / fanout
	b.webhooks.Breaker = domain.WebhookBreakerPolicy{Backoff: whDownBackoff, MaxBackoff: whDownBackoff}
	defer func() { b.webhooks.Breaker = domain.WebhookBreakerPolicy{} }()
	b.configure(fanout)

	paths := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("/%s/%d", prefix, i)
		}
		return out
	}
	healthyProject := "wh-healthy10-" + b.e.runID
	if _, err := b.setupProject(ctx, healthyProject, paths("healthy10", fanout)); err != nil {
		return result{}, err
	}
	// A warm-up, unmeasured: the first run of a process is the slowest.
	if _, _, err := b.downThroughput(ctx, healthyProject, events, fanout, uuid.Nil); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}

	downProject := "wh-down1-" + b.e.runID
	if _, err := b.setupProject(ctx, downProject, paths("down1", fanout-1)); err != nil {
		return result{}, err
	}
	deadURL, err := closedPortURL()
	if err != nil {
		return result{}, err
	}
	dead, err := b.app.CreateWebhookDestination(ctx, b.id, app.CreateWebhookDestinationInput{ProjectID: downProject, URL: deadURL})
	if err != nil {
		return result{}, err
	}
	if _, err := b.app.CreateWebhookSubscription(ctx, b.id, app.CreateWebhookSubscriptionInput{
		ProjectID: downProject, DestinationID: dead.Destination.ID.String(), EventTypes: []string{whEventTypes}}); err != nil {
		return result{}, err
	}
	down, window, err := b.downThroughput(ctx, downProject, events, fanout-1, dead.Destination.ID)
	if err != nil {
		return result{}, fmt.Errorf("one down: %w", err)
	}
	all, _, err := b.downThroughput(ctx, healthyProject, events, fanout, uuid.Nil)
	if err != nil {
		return result{}, fmt.Errorf("all healthy: %w", err)
	}

	// The dead destination's requests from its breaker's opening to the
	// end of the window: each attempt is one request (or none at all).
	var openedAt time.Time
	if err := b.e.pool.QueryRow(ctx, `SELECT min(recorded_at) FROM audit_events WHERE tenant_id = $1 AND project_id = $2
		AND action = 'webhook.destination.circuit_opened'`, b.tenant, downProject).Scan(&openedAt); err != nil {
		return result{}, fmt.Errorf("the breaker did not open: %w", err)
	}
	var requests int64
	// A succeeded attempt has no row: its delivery's row keeps it.
	if err := b.e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_delivery_attempts a
		JOIN webhook_deliveries d ON d.id = a.delivery_id
		WHERE d.tenant_id = $1 AND d.project_id = $2 AND d.destination_id = $3 AND a.started_at > $4 AND a.started_at <= $5)
		+ (SELECT count(*) FROM webhook_deliveries d
		WHERE d.tenant_id = $1 AND d.project_id = $2 AND d.destination_id = $3 AND d.attempt_started_at > $4
			AND d.attempt_started_at <= $5)`,
		b.tenant, downProject, dead.Destination.ID, openedAt, window).Scan(&requests); err != nil {
		return result{}, err
	}
	periods := max(window.Sub(openedAt).Seconds()/whDownBackoff.Seconds(), 1)
	perPeriod := float64(requests) / periods
	duePerPeriod := float64(events) / periods

	check := func(ok bool) *bool { return &ok }
	perDest := func(t whThroughput, n int) float64 { return t.rate() / float64(n) }
	oRate, bRate := perDest(down, fanout-1), perDest(all, fanout)
	r := ratio(oRate, bRate)
	metrics := []metric{
		{Name: "deliveries/s per healthy destination", Ours: round(oRate, 1), Baseline: round(bRate, 1), Ratio: r,
			Target: fmt.Sprintf(">= %.1f", whDownMinRatio), Pass: check(r >= whDownMinRatio)},
		{Name: "dead destination requests per backoff period once open", Ours: round(perPeriod, 2), Baseline: round(duePerPeriod, 2),
			Ratio: ratio(perPeriod, duePerPeriod), Target: "ours <= 1", Pass: check(perPeriod <= 1)},
	}
	note := fmt.Sprintf("%d events recorded in batches of %d while River runs, to a project of 10 destinations (paths of one receiver): "+
		"ours with one of them down (https to a closed port of 127.0.0.1: connection refused), the baseline with all 10 healthy, in the same run; "+
		"deliveries/s per healthy destination = the healthy destinations' deliveries / (first record -> last receipt) / their count "+
		"(ours %d over %.2fs, baseline %d over %.2fs; after an unmeasured warm-up run of the healthy project); breaker: %d failures open it, backoff %s fixed; "+
		"the dead destination made %d requests in the %.1fs from its opening to the last healthy receipt (%.1f backoff periods), "+
		"baseline: its deliveries that came due in that time (%d), each at least one request without a breaker; "+
		"MaxInFlightPerDestination %d, %d webhook workers",
		events, whBatch, down.deliveries, down.elapsed.Seconds(), all.deliveries, all.elapsed.Seconds(),
		domain.DefaultWebhookBreakerPolicy.Failures, whDownBackoff, requests, window.Sub(openedAt).Seconds(), periods, events,
		b.inFlight, b.workers)
	return result{Scenario: "webhook-delivery one destination down among 10", Metrics: metrics,
		OursOps: down.deliveries, BaselineOps: all.deliveries, Seconds: math.Round(down.elapsed.Seconds()*10) / 10, Note: note}, nil
}

// downThroughput records events into project while River runs and waits
// until the healthy destinations (healthy of them) got theirs; it returns
// the throughput and the time the last one arrived. The dead destination's
// jobs are deleted after, with River stopped.
func (b *webhookBench) downThroughput(ctx context.Context, project string, events, healthy int, dead uuid.UUID) (t whThroughput, end time.Time, err error) {
	stop, err := b.startRiver(ctx)
	if err != nil {
		return t, end, err
	}
	defer func() {
		stop()
		if dead != uuid.Nil {
			_, cerr := b.e.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'webhook_delivery' AND args->>'destination_id' = $1`, dead.String())
			if err == nil && cerr != nil {
				err = fmt.Errorf("deleting the dead destination's jobs: %w", cerr)
			}
		}
	}()
	if err := b.maintain(ctx); err != nil {
		return t, end, err
	}
	if err := b.recv.reset(ctx); err != nil {
		return t, end, err
	}
	drafts := benchDrafts(uint64(healthy), project)
	t0 := time.Now()
	for done := 0; done < events; {
		k := min(whBatch, events-done, len(drafts))
		if _, err := b.app.RecordAuditEvents(ctx, b.id, app.RecordAuditEventsInput{Events: drafts[:k]}); err != nil {
			return t, end, fmt.Errorf("recording: %w", err)
		}
		done += k
	}
	t.record = time.Since(t0)
	t.deliveries = int64(events * healthy)
	timeout := 60*time.Second + time.Duration(t.deliveries)*5*time.Millisecond
	_, rep, err := b.recv.report(ctx, receiverCommand{From: math.MinInt64, To: math.MaxInt64, Expect: t.deliveries, WaitMs: timeout.Milliseconds()})
	if err != nil {
		return t, end, err
	}
	if rep.Matched < t.deliveries {
		return t, end, fmt.Errorf("the receiver got %d of %d deliveries", rep.Matched, t.deliveries)
	}
	t.rep = rep
	t.elapsed = time.Duration(rep.NthNs - t0.UnixNano())
	fmt.Fprintf(os.Stderr, "bench: webhook-delivery one down: %s: %d deliveries in %s\n", project, t.deliveries, t.elapsed.Round(time.Millisecond))
	return t, time.Unix(0, rep.NthNs), nil
}

// closedPortURL returns an https URL on 127.0.0.1 at a port nothing
// listens on: connections to it are refused at once.
func closedPortURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return "https://" + addr + "/dead", nil
}
