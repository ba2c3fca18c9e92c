package domain

import (
	"testing"
	"time"
)

func TestAuditStreamCursorBreakerOpensBacksOffAndCloses(t *testing.T) {
	p := WebhookBreakerPolicy{Failures: 3, Backoff: time.Minute, MaxBackoff: 3 * time.Minute}
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	c := AuditStreamCursor{}
	var waits []time.Duration
	for i := 0; i < 6; i++ {
		retry, opened := c.RetryAfterFailure(now, time.Second, p)
		if opened != (i == 2) {
			t.Fatalf("failure %d: opened %v", i+1, opened)
		}
		waits = append(waits, retry.Sub(now))
		c.Failures++
		c.RetryAt = &retry
		want := WebhookCircuitClosed
		if c.Failures >= 3 {
			want = WebhookCircuitOpen
		}
		if got := c.Circuit(now, p); got != want {
			t.Fatalf("after %d failures: %s, want %s", c.Failures, got, want)
		}
	}
	want := []time.Duration{time.Second, time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	if got := c.Circuit(c.RetryAt.Add(time.Millisecond), p); got != WebhookCircuitHalfOpen {
		t.Fatalf("after the backoff: %s, want HALF_OPEN (one probe)", got)
	}
	c.Failures, c.RetryAt = 0, nil // an acknowledged batch
	if got := c.Circuit(now, p); got != WebhookCircuitClosed {
		t.Fatalf("after a success: %s", got)
	}
}
