package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// retryPolicy is how many times and how long apart a call is tried.
type retryPolicy struct {
	attempts int
	min, max time.Duration
}

// delay is the wait before attempt n+1 (n >= 1): exponential from min,
// capped at max, with "equal jitter" (half fixed, half random), and never
// shorter than the server's retryAfter.
func (p retryPolicy) delay(n int, retryAfter time.Duration) time.Duration {
	d := p.min
	for i := 1; i < n && d < p.max; i++ {
		d *= 2
	}
	d = min(d, p.max)
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
