package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRateFlag(t *testing.T) {
	for text, want := range map[string]rateFlag{
		"1000:2000": {Rate: 1000, Burst: 2000},
		"10":        {Rate: 10, Burst: 20},
		"0.5/s":     {Rate: 0.5, Burst: 1},
		"0":         {},
		"0:5":       {},
	} {
		var got rateFlag
		require.NoError(t, got.UnmarshalText([]byte(text)), text)
		require.Equal(t, want, got, text)
	}
	for _, bad := range []string{"", "abc", "-1", "10:0", "10:x", "1e9", "NaN"} {
		var got rateFlag
		require.Error(t, got.UnmarshalText([]byte(bad)), bad)
	}
}

func TestDaysFlag(t *testing.T) {
	for text, want := range map[string]daysFlag{"400d": 400, "1": 1, "36500d": 36500} {
		var got daysFlag
		require.NoError(t, got.UnmarshalText([]byte(text)), text)
		require.Equal(t, want, got, text)
	}
	for _, bad := range []string{"", "0", "0d", "36501", "1h", "-3d", "d"} {
		var got daysFlag
		require.Error(t, got.UnmarshalText([]byte(bad)), bad)
	}
}
