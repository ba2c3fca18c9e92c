package domain

import (
	"fmt"
	"time"
)

// WebhookDestinationHealth is a destination's circuit breaker and its
// recent outcomes, shared by every process through the destination's row.
type WebhookDestinationHealth struct {
	// ConsecutiveFailures counts failed attempts since the last success.
	ConsecutiveFailures int
	// FailingSince is the first failure since the last success.
	FailingSince  *time.Time
	LastSuccessAt *time.Time
	LastFailureAt *time.Time
	// CircuitOpenUntil is set while the breaker is open: no request before
	// it, then one probe at a time (half open) until one succeeds.
	CircuitOpenUntil *time.Time
	// CircuitOpens counts the breaker's openings since it last closed: the
	// exponent of its backoff.
	CircuitOpens int
	// ProbeUntil is, while a probe is out, when its claim lapses.
	ProbeUntil *time.Time
	// HourStart is the start of the clock hour the Hour counts are of; the
	// Prev counts are of the hour before it.
	HourStart                         *time.Time
	HourSucceeded, HourFailed         int
	PrevHourSucceeded, PrevHourFailed int
}

// WebhookCircuitState is the state of a destination's circuit breaker.
type WebhookCircuitState string

// The circuit states.
const (
	// WebhookCircuitClosed: requests go out.
	WebhookCircuitClosed WebhookCircuitState = "CLOSED"
	// WebhookCircuitOpen: no request goes out until CircuitOpenUntil.
	WebhookCircuitOpen WebhookCircuitState = "OPEN"
	// WebhookCircuitHalfOpen: one probe at a time may go out; its success
	// closes the breaker, its failure opens it for a longer backoff.
	WebhookCircuitHalfOpen WebhookCircuitState = "HALF_OPEN"
)

// Circuit returns the breaker's state at now.
func (h WebhookDestinationHealth) Circuit(now time.Time) WebhookCircuitState {
	switch {
	case h.CircuitOpenUntil == nil:
		return WebhookCircuitClosed
	case now.Before(*h.CircuitOpenUntil):
		return WebhookCircuitOpen
	}
	return WebhookCircuitHalfOpen
}

// SuccessRate returns the share of succeeded attempts over the hour before
// now, and the attempts it is of; ok is false without attempts. It is
// estimated from two clock-hour windows: all of the current one, and of
// the previous one the part of it that lies in the last hour, assuming its
// attempts were spread evenly.
func (h WebhookDestinationHealth) SuccessRate(now time.Time) (rate, attempts float64, ok bool) {
	h.roll(now)
	if h.HourStart == nil {
		return 0, 0, false
	}
	weight := 1 - float64(now.Sub(*h.HourStart))/float64(time.Hour)
	succeeded := float64(h.HourSucceeded) + weight*float64(h.PrevHourSucceeded)
	attempts = succeeded + float64(h.HourFailed) + weight*float64(h.PrevHourFailed)
	if attempts <= 0 {
		return 0, 0, false
	}
	return succeeded / attempts, attempts, true
}

// roll moves the hour windows to now's clock hour.
func (h *WebhookDestinationHealth) roll(now time.Time) {
	hour := now.Truncate(time.Hour)
	switch {
	case h.HourStart == nil:
		return
	case h.HourStart.Equal(hour):
		return
	case h.HourStart.Add(time.Hour).Equal(hour):
		h.PrevHourSucceeded, h.PrevHourFailed = h.HourSucceeded, h.HourFailed
	default:
		h.PrevHourSucceeded, h.PrevHourFailed = 0, 0
	}
	h.HourSucceeded, h.HourFailed = 0, 0
	h.HourStart = &hour
}

// Steady reports whether the health is steady at now: breaker closed
// and not opened since it last closed, no probe out, no failure since the
// last success, and hour counts of now's clock hour. A tally of successes
// alone then changes nothing but LastSuccessAt and HourSucceeded, and
// reports nothing (see RecordAttempts): the store can count it in one
// statement whose condition is this one, without reading the row first
// (the store's RecordWebhookDestinationSuccesses).
func (h WebhookDestinationHealth) Steady(now time.Time) bool {
	return h.CircuitOpenUntil == nil && h.CircuitOpens == 0 && h.ProbeUntil == nil &&
		h.ConsecutiveFailures == 0 && h.FailingSince == nil &&
		h.HourStart != nil && h.HourStart.Equal(now.Truncate(time.Hour))
}

// closeCircuit closes the breaker.
func (h *WebhookDestinationHealth) closeCircuit() {
	h.CircuitOpenUntil, h.CircuitOpens, h.ProbeUntil = nil, 0, nil
}

// WebhookBreakerPolicy configures the circuit breaker and auto-disable.
type WebhookBreakerPolicy struct {
	// Failures is how many consecutive failed attempts open the breaker.
	Failures int
	// Backoff is the first wait of an open breaker; each failed probe
	// doubles it, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// AutoDisableAfter is how long a destination may fail without a
	// success before the service disables it.
	AutoDisableAfter time.Duration
}

// DefaultWebhookBreakerPolicy opens after 10 consecutive failures, probes
// after 30 s, 1 m, 2 m, … up to an hour, and auto-disables after 5 days.
var DefaultWebhookBreakerPolicy = WebhookBreakerPolicy{
	Failures: 10, Backoff: 30 * time.Second, MaxBackoff: time.Hour, AutoDisableAfter: 5 * 24 * time.Hour,
}

// WithDefaults returns p with its zero fields set from
// DefaultWebhookBreakerPolicy.
func (p WebhookBreakerPolicy) WithDefaults() WebhookBreakerPolicy {
	def := DefaultWebhookBreakerPolicy
	if p.Failures <= 0 {
		p.Failures = def.Failures
	}
	if p.Backoff <= 0 {
		p.Backoff = def.Backoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = def.MaxBackoff
	}
	if p.AutoDisableAfter <= 0 {
		p.AutoDisableAfter = def.AutoDisableAfter
	}
	return p
}

// backoff is the wait of the opens-th opening in a row (1-based).
func (p WebhookBreakerPolicy) backoff(opens int) time.Duration {
	d := p.Backoff
	for i := 1; i < opens && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// WebhookAttemptTally is what a batch of recorded attempts to one
// destination tells its health.
type WebhookAttemptTally struct {
	// Succeeded and Failed count the attempts that got a 2xx and those
	// that failed because of the receiver (not interrupted ones, nor ones
	// that could not be signed).
	Succeeded, Failed int
	// Gone is set when the receiver answered 410 Gone.
	Gone bool
}

// WebhookHealthChange tells what recording a tally changed that the
// service reports as an operational event.
type WebhookHealthChange struct {
	CircuitOpened, CircuitClosed, AutoDisabled bool
}

// Any reports whether anything is to be reported.
func (c WebhookHealthChange) Any() bool { return c.CircuitOpened || c.CircuitClosed || c.AutoDisabled }

// RecordAttempts updates the destination's health with the outcomes of a
// batch of its attempts, at now. A success closes the breaker and clears
// the failures; failures without a success count towards opening it (at
// p.Failures in a row), and a failed probe opens it again for twice the
// backoff (at most p.MaxBackoff). A destination that answered 410 Gone, or
// has failed without a success for p.AutoDisableAfter, is AUTO_DISABLED.
func (d *WebhookDestination) RecordAttempts(t WebhookAttemptTally, now time.Time, p WebhookBreakerPolicy) WebhookHealthChange {
	var c WebhookHealthChange
	h := &d.Health
	if h.HourStart == nil {
		hour := now.Truncate(time.Hour)
		h.HourStart = &hour
	}
	h.roll(now)
	h.HourSucceeded += t.Succeeded
	h.HourFailed += t.Failed
	if t.Failed > 0 || t.Gone {
		h.LastFailureAt = &now
	}
	switch {
	case t.Succeeded > 0:
		h.LastSuccessAt = &now
		c.CircuitClosed = h.CircuitOpenUntil != nil
		h.closeCircuit()
		h.ConsecutiveFailures, h.FailingSince = 0, nil
	case t.Failed > 0:
		h.ConsecutiveFailures += t.Failed
		if h.FailingSince == nil {
			h.FailingSince = &now
		}
		switch h.Circuit(now) {
		case WebhookCircuitHalfOpen:
			// The probe failed: wait longer before the next one.
			h.CircuitOpens++
			until := now.Add(p.backoff(h.CircuitOpens))
			h.CircuitOpenUntil, h.ProbeUntil = &until, nil
		case WebhookCircuitClosed:
			if h.ConsecutiveFailures >= p.Failures {
				h.CircuitOpens = 1
				until := now.Add(p.backoff(1))
				h.CircuitOpenUntil, c.CircuitOpened = &until, true
			}
		}
	}
	switch {
	case t.Gone:
		c.AutoDisabled = d.Disable(WebhookDestinationAutoDisabled, "the receiver answered 410 Gone", now)
	case h.FailingSince != nil && p.AutoDisableAfter > 0 && now.Sub(*h.FailingSince) >= p.AutoDisableAfter:
		c.AutoDisabled = d.Disable(WebhookDestinationAutoDisabled,
			fmt.Sprintf("every attempt failed for %s, since %s", p.AutoDisableAfter, h.FailingSince.Format(time.RFC3339)), now)
	}
	return c
}

// WebhookSendGate is what a delivery job may do with a destination now.
type WebhookSendGate int

// The gate's answers.
const (
	// WebhookGateSend: send, within the destination's limits.
	WebhookGateSend WebhookSendGate = iota
	// WebhookGateProbe: the breaker is half open; one request may go out
	// as its probe, if the job wins the claim.
	WebhookGateProbe
	// WebhookGateWait: the breaker is open; send nothing before the time
	// Gate returns, and charge no attempt.
	WebhookGateWait
	// WebhookGatePause: the destination is disabled; its due deliveries
	// wait as PAUSED.
	WebhookGatePause
	// WebhookGateCancel: the destination was deleted; its due deliveries
	// end as CANCELLED.
	WebhookGateCancel
)

// Gate tells what a delivery job may do with the destination at now, and
// for WebhookGateWait until when.
func (d WebhookDestination) Gate(now time.Time) (WebhookSendGate, time.Time) {
	switch {
	case d.DeletedAt != nil:
		return WebhookGateCancel, time.Time{}
	case d.State != WebhookDestinationEnabled:
		return WebhookGatePause, time.Time{}
	}
	switch d.Health.Circuit(now) {
	case WebhookCircuitOpen:
		return WebhookGateWait, *d.Health.CircuitOpenUntil
	case WebhookCircuitHalfOpen:
		return WebhookGateProbe, time.Time{}
	}
	return WebhookGateSend, time.Time{}
}
