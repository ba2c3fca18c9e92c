package auth_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/auth"
)

func TestBearerToken(t *testing.T) {
	cases := []struct {
		header string
		token  string
		ok     bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc.def.ghi", "abc.def.ghi", true},
		{"BEARER abc.def.ghi", "abc.def.ghi", true},
		{"  Bearer    abc.def.ghi  ", "abc.def.ghi", true},
		{"Bearer\tabc.def.ghi", "abc.def.ghi", true},
		{"Bearer abc-_=+/", "abc-_=+/", true},
		{"", "", false},
		{"   ", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Bearerabc.def.ghi", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Token abc", "", false},
		{"abc.def.ghi", "", false},
		{"Bearer abc def", "", false},
		{"Bearer abc\tdef", "", false},
	}
	for _, tc := range cases {
		token, ok := auth.BearerToken(tc.header)
		require.Equal(t, tc.ok, ok, "header %q", tc.header)
		require.Equal(t, tc.token, token, "header %q", tc.header)
	}
}
