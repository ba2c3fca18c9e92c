package fastpath

import (
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// marshal is what a gqlgen marshaler writes.
func marshal(m graphql.Marshaler) string {
	var sb strings.Builder
	m.MarshalGQL(&sb)
	return sb.String()
}

// TestAppendersMatchGqlgen holds the page writer's value encoders to the
// marshalers of the generic executor, byte for byte, on the values where
// they could differ: escapes, bytes that are not UTF-8, zero values.
func TestAppendersMatchGqlgen(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "tab\tcr\rnl\n", "\x00\x01\x1f\x7f", "é ☃ 😀",
		"bad \xff\xfe utf8", "\u2028\u2029", "<html>&amp;", "end\\"} {
		require.Equal(t, marshal(graphql.MarshalString(s)), string(appendString(nil, s)), "%q", s)
	}
	for _, tm := range []time.Time{{}, time.Date(2026, 12, 2, 4, 5, 6, 0, time.UTC), time.Date(2026, 12, 2, 4, 5, 6, 123456000, time.UTC),
		time.Date(1999, 1, 2, 3, 4, 5, 7, time.FixedZone("x", 3600))} {
		require.Equal(t, marshal(graphql.MarshalTime(tm)), string(appendTime(nil, tm)), "%v", tm)
	}
	for _, id := range []uuid.UUID{uuid.Nil, uuid.MustParse("0193f3c4-abcd-7000-8000-00000000ffff"), uuid.New()} {
		require.Equal(t, marshal(graphql.MarshalUUID(id)), string(appendUUID(nil, id)), "%v", id)
	}
}
