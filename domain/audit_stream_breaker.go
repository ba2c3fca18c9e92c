package domain

import "time"

// The circuit breaker of an audit stream's cursor is the webhooks' breaker
// (WebhookBreakerPolicy, WebhookCircuitState) over the cursor's own
// columns: its failures since the last acknowledged batch, and RetryAt.
// Below Failures failures in a row the cursor retries on the stream's own
// short backoff; at Failures the breaker opens: no request before
// RetryAt, then one probe (the cursor's lease lets one process send at a
// time), whose failure opens it again for twice as long (from Backoff up
// to MaxBackoff), and whose success closes it (the failures are cleared).

// Circuit returns the state of c's breaker at now under p.
func (c AuditStreamCursor) Circuit(now time.Time, p WebhookBreakerPolicy) WebhookCircuitState {
	switch {
	case c.Failures < p.WithDefaults().Failures:
		return WebhookCircuitClosed
	case c.RetryAt != nil && now.Before(*c.RetryAt):
		return WebhookCircuitOpen
	}
	return WebhookCircuitHalfOpen
}

// RetryAfterFailure returns when c may be tried again after one more failed
// delivery at now (c.Failures counts the earlier ones): after wait, the
// stream's own retry backoff, while the breaker stays closed; once the
// failures reach p.Failures, after the breaker's backoff for that opening
// (or wait, when longer). opened reports that this failure opened it.
func (c AuditStreamCursor) RetryAfterFailure(now time.Time, wait time.Duration, p WebhookBreakerPolicy) (retryAt time.Time, opened bool) {
	p = p.WithDefaults()
	n := c.Failures + 1
	if n >= p.Failures {
		wait = max(wait, p.backoff(n-p.Failures+1))
	}
	return now.Add(wait), n == p.Failures
}
