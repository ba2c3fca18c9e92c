package webhook

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// parseRetryAfter interprets a Retry-After header value (RFC 9110, section
// 10.2.3) relative to now: either a non-negative number of delay seconds or
// an HTTP-date. It returns 0 for an empty, malformed or past value and
// saturates instead of overflowing.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			// All digits but too large still means "a very long time".
			if strings.Trim(v, "0123456789") == "" {
				return time.Duration(math.MaxInt64)
			}
			return 0
		}
		if secs > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
