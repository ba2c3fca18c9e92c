package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCoalesceRanges: ranges are resolved against the size, merged when
// they overlap or touch, and refused past maxDownloadRanges; what is not a
// valid byte range set is left for http.ServeContent.
func TestCoalesceRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, want string
		ok           bool
	}{
		{"bytes=0-9", "bytes=0-9", true},
		{"bytes=0-9,5-20", "bytes=0-20", true},
		{"bytes=10-19,0-9", "bytes=0-19", true},
		{"bytes=0-9, 11-12", "bytes=0-9,11-12", true},
		{"bytes=-10", "bytes=90-99", true},
		{"bytes=-1000", "bytes=0-99", true},
		{"bytes=95-", "bytes=95-99", true},
		{"bytes=50-500", "bytes=50-99", true},
		{"bytes=0-9,200-300", "bytes=0-9", true},
		{"bytes=200-300", "bytes=200-300", true}, // all unsatisfiable: ServeContent answers 416
		{"bytes=9-0", "bytes=9-0", true},
		{"bytes=x-1", "bytes=x-1", true},
		{"items=0-1", "items=0-1", true},
		{"bytes=" + ranges(9, 2), "", false},
		{"bytes=" + ranges(8, 2), ranges(8, 2), true},
		{"bytes=" + ranges(100, 1), "bytes=0-99", true},
	} {
		got, ok := coalesceRanges(tc.header, 100)
		require.Equal(t, tc.ok, ok, tc.header)
		if ok {
			want := tc.want
			if !strings.HasPrefix(want, "bytes=") && !strings.HasPrefix(want, "items=") {
				want = "bytes=" + want
			}
			require.Equal(t, want, got, tc.header)
		}
	}
}

// ranges lists n one-byte ranges step bytes apart.
func ranges(n, step int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i*step) + "-" + strconv.Itoa(i*step)
	}
	return strings.Join(parts, ",")
}
