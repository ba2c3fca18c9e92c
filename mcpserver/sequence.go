package mcpserver

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Sequence is a position in a project's dense sequence of audit events. It
// is read from a decimal string (as the API writes uint64 values, lossless
// in JavaScript) or a JSON integer, and written as a decimal string.
type Sequence uint64

// UnmarshalJSON implements json.Unmarshaler.
func (s *Sequence) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return badInput("sequence", "must be a decimal unsigned 64-bit integer")
	}
	*s = Sequence(n)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (s Sequence) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatUint(uint64(s), 10))
}

// uint64Ptr is the value of an optional Sequence.
func (s *Sequence) uint64Ptr() *uint64 {
	if s == nil {
		return nil
	}
	v := uint64(*s)
	return &v
}
