package main

import (
	"math/bits"
	"sync/atomic"
)

// latencyHist is a concurrent histogram of latencies in microseconds with
// about 3% resolution: values below histExact are counted exactly, larger
// ones in buckets of their 6 leading bits. It holds counts only, so that a
// soak's hundreds of millions of deliveries cost a fixed few kilobytes.
type latencyHist struct {
	counts [histBuckets]atomic.Int64
	total  atomic.Int64
	max    atomic.Int64
}

const (
	// histExact values (0..63 µs) have a bucket each; above, each power
	// of two has histPerOctave buckets.
	histExact     = 64
	histPerOctave = 32
	histBuckets   = histExact + 58*histPerOctave
)

// histIndex returns the bucket of v.
func histIndex(v int64) int {
	if v < histExact {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - 6 // keep the 6 leading bits
	mantissa := int(v >> shift)        // 32..63
	return histExact + (shift-1)*histPerOctave + mantissa - histPerOctave
}

// histUpper returns the largest value of bucket i.
func histUpper(i int) int64 {
	if i < histExact {
		return int64(i)
	}
	shift := (i-histExact)/histPerOctave + 1
	mantissa := int64((i-histExact)%histPerOctave + histPerOctave)
	return (mantissa+1)<<shift - 1
}

// add counts v microseconds.
func (h *latencyHist) add(v int64) {
	h.counts[histIndex(v)].Add(1)
	h.total.Add(1)
	for m := h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
}

// reset forgets every value (not atomically: call it while no one adds).
func (h *latencyHist) reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.total.Store(0)
	h.max.Store(0)
}

// quantile returns the upper bound of the bucket holding the q-th value
// (0 < q <= 1), capped at the largest value seen; 0 when empty.
func (h *latencyHist) quantile(q float64) int64 {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := max(int64(q*float64(n)+0.5), 1) // nearest rank, 1-based
	var seen int64
	for i := range h.counts {
		if seen += h.counts[i].Load(); seen >= rank {
			return min(histUpper(i), h.max.Load())
		}
	}
	return h.max.Load()
}
