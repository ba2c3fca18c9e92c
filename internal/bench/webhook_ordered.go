package main

// The webhook-delivery row "ordered fan-out 1": a project with one
// subscription with ordering SEQUENCE, whose deliveries go one after the
// other (each only after the previous one was answered 2xx), measured as
// the fan-out rows measure ours from a backlog (the events and their outbox
// jobs committed with River stopped, then River started), against the same
// measurement of an UNORDERED subscription in this run. The target is
// absolute: at least whMinOrderedRate deliveries/s to the local receiver.

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

const (
	orderedRowName = "webhook-delivery ordered fan-out 1"
	// whMinOrderedRate is the ordered row's target (issue 18).
	whMinOrderedRate = 1000
	// whOrderedEvents bounds the ordered row's events per side: at the
	// target, 5,000 take 5 s.
	whOrderedEvents = 5000
)

// orderedRow runs the ordered row: ours ordered, then ours unordered.
func (b *webhookBench) orderedRow(ctx context.Context) (result, error) {
	events := min(b.opts.webhookDeliveries, whOrderedEvents)
	fmt.Fprintf(os.Stderr, "bench: %s: %d deliveries per side\n", orderedRowName, events)
	b.configure(1)
	measure := func(ordering domain.WebhookOrdering) (whThroughput, error) {
		project := fmt.Sprintf("wh-%s-%s", strings.ToLower(string(ordering)), b.e.runID)
		d, err := b.app.CreateWebhookDestination(ctx, b.id, app.CreateWebhookDestinationInput{ProjectID: project, URL: b.recv.url + "/" + project})
		if err != nil {
			return whThroughput{}, fmt.Errorf("creating the destination: %w", err)
		}
		if _, err := b.app.CreateWebhookSubscription(ctx, b.id, app.CreateWebhookSubscriptionInput{
			ProjectID: project, DestinationID: d.Destination.ID.String(), EventTypes: []string{whEventTypes}, Ordering: ordering,
		}); err != nil {
			return whThroughput{}, fmt.Errorf("subscribing: %w", err)
		}
		backlog, _, err := b.oursThroughput(ctx, project, benchDrafts(7, project), events, 1)
		return backlog, err
	}
	var ordered, unordered []whThroughput
	for range b.opts.webhookRepeats {
		o, err := measure(domain.WebhookOrderingSequence)
		if err != nil {
			return result{}, fmt.Errorf("ordered: %w", err)
		}
		u, err := measure(domain.WebhookOrderingUnordered)
		if err != nil {
			return result{}, fmt.Errorf("unordered: %w", err)
		}
		ordered, unordered = append(ordered, o), append(unordered, u)
	}
	o, u := medianRun(ordered), medianRun(unordered)
	pass := o.rate() >= whMinOrderedRate
	metrics := []metric{
		{Name: "deliveries/s", Ours: round(o.rate(), 1), Baseline: round(u.rate(), 1), Ratio: ratio(o.rate(), u.rate())},
		{Name: "deliveries/s, absolute", Ours: round(o.rate(), 1), Baseline: whMinOrderedRate, Ratio: ratio(o.rate(), whMinOrderedRate),
			Target: fmt.Sprintf("ours >= %d", whMinOrderedRate), Pass: &pass},
	}
	note := fmt.Sprintf("%d events to a project with one subscription: ours with ordering SEQUENCE (one webhook_ordered_delivery job "+
		"at a time sends them one by one, each after the previous 2xx), baseline the same with UNORDERED (webhook_delivery jobs, "+
		"MaxInFlightPerDestination %d); both from a backlog: app.RecordAuditEvents in batches of %d with River stopped, then River started, "+
		"rate = deliveries / (River's start -> last receipt); the median of %d runs each (deliveries/s: ordered %s, unordered %s); "+
		"the second metric compares ours with the 1,000/s target",
		events, b.inFlight, whBatch, len(o.runs), formatRates(o.runs), formatRates(u.runs))
	return result{Scenario: orderedRowName, Metrics: metrics, OursOps: o.deliveries, BaselineOps: u.deliveries,
		Seconds: round(o.elapsed.Seconds(), 1), Note: note}, nil
}
