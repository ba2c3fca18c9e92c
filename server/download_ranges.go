package server

import (
	"slices"
	"strconv"
	"strings"
)

// maxDownloadRanges bounds the byte ranges of one download request, after
// overlapping and adjacent ranges are merged: each range of a multi-range
// response is a read of the object of its own.
const maxDownloadRanges = 8

// byteRange is an inclusive range of byte offsets.
type byteRange struct{ first, last int64 }

// coalesceRanges rewrites a Range header for an object of size bytes so
// that each byte is asked for once: its ranges resolved against size,
// unsatisfiable ones dropped, overlapping and adjacent ones merged, in
// order. It reports false when more than maxDownloadRanges ranges remain
// (the request is refused with 416). A header that is not a valid
// "bytes=" range set, or whose ranges are all unsatisfiable, is returned
// unchanged for http.ServeContent to answer as the RFC says.
func coalesceRanges(header string, size int64) (string, bool) {
	spec, ok := strings.CutPrefix(header, "bytes=")
	if !ok || size <= 0 {
		return header, true
	}
	var ranges []byteRange
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		firstText, lastText, found := strings.Cut(part, "-")
		if !found {
			return header, true
		}
		var r byteRange
		switch {
		case firstText == "":
			n, err := strconv.ParseInt(lastText, 10, 64)
			if err != nil || n < 0 {
				return header, true
			}
			r = byteRange{first: max(size-n, 0), last: size - 1}
			if n == 0 {
				continue // unsatisfiable
			}
		default:
			first, err := strconv.ParseInt(firstText, 10, 64)
			if err != nil || first < 0 {
				return header, true
			}
			last := size - 1
			if lastText != "" {
				if last, err = strconv.ParseInt(lastText, 10, 64); err != nil || last < first {
					return header, true
				}
			}
			if first >= size {
				continue // unsatisfiable
			}
			r = byteRange{first: first, last: min(last, size-1)}
		}
		ranges = append(ranges, r)
	}
	if len(ranges) == 0 {
		return header, true
	}
	slices.SortFunc(ranges, func(a, b byteRange) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	merged := ranges[:1]
	for _, r := range ranges[1:] {
		if prev := &merged[len(merged)-1]; r.first <= prev.last+1 {
			prev.last = max(prev.last, r.last)
			continue
		}
		merged = append(merged, r)
	}
	if len(merged) > maxDownloadRanges {
		return "", false
	}
	var b strings.Builder
	b.WriteString("bytes=")
	for i, r := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.first, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(r.last, 10))
	}
	return b.String(), true
}
