package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLatencyHist checks bucket bounds and that quantiles stay within the
// resolution of the exact ones.
func TestLatencyHist(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 1000, 123456, 1 << 40} {
		i := histIndex(v)
		if i >= histBuckets {
			t.Fatalf("value %d: bucket %d out of range", v, i)
		}
		if up := histUpper(i); up < v || (i > 0 && histUpper(i-1) >= v) {
			t.Fatalf("value %d: bucket %d spans (%d, %d]", v, i, histUpper(i-1), up)
		}
	}
	var h latencyHist
	vals := make([]int64, 100000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 20000)
		h.add(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.99, 1} {
		exact := vals[int(q*float64(len(vals))+0.5)-1]
		got := h.quantile(q)
		if got < exact || float64(got) > float64(exact)*1.04+1 {
			t.Fatalf("q%.2f: got %d, exact %d", q, got, exact)
		}
	}
}
