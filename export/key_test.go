package export

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

var exportID = uuid.MustParse("0b9f2a4e-5c1d-4e8f-9a7b-3c2d1e0f4a5b")

func TestKeyLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format      domain.DataExportFormat
		compression domain.DataExportCompression
		ext         string
	}{
		{domain.DataExportNDJSON, domain.DataExportUncompressed, "ndjson"},
		{domain.DataExportNDJSON, domain.DataExportGzip, "ndjson.gz"},
		{domain.DataExportCSV, domain.DataExportUncompressed, "csv"},
		{domain.DataExportCSV, domain.DataExportGzip, "csv.gz"},
	} {
		require.Equal(t,
			"exports/acme/plant-1/0b9f2a4e-5c1d-4e8f-9a7b-3c2d1e0f4a5b-3."+tc.ext,
			Key("acme", "plant-1", exportID, 3, tc.format, tc.compression))
	}
	require.Equal(t, "exports/acme/plant-1/0b9f2a4e-5c1d-4e8f-9a7b-3c2d1e0f4a5b-", KeyPrefix("acme", "plant-1", exportID))
	require.True(t, strings.HasPrefix(Key("acme", "plant-1", exportID, 12, domain.DataExportCSV, domain.DataExportGzip), KeyPrefix("acme", "plant-1", exportID)))
}

func TestKeyEscaping(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Acme_1.x-y": "Acme_1.x-y",
		"a/b":        "a%2Fb",
		"100%":       "100%25",
		"a b":        "a%20b",
		".":          "%2E",
		"..":         "%2E%2E",
		"...":        "...",
		"α":          "%CE%B1",
		"a\x00b":     "a%00b",
		"":           "",
	} {
		require.Equal(t, want, escapeSegment(in), "%q", in)
		back, err := url.PathUnescape(want)
		require.NoError(t, err)
		require.Equal(t, in, back)
	}
}

func TestKeyInjective(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{"a/b", "c"}, {"a", "b/c"}, {"a%2Fb", "c"}, {"a", "b%2Fc"},
		{".", "x"}, {"%2E", "x"}, {"a", "b"}, {"a/", "b"}, {"a", "/b"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		key := Key(p[0], p[1], exportID, 1, domain.DataExportCSV, domain.DataExportUncompressed)
		prev, dup := seen[key]
		require.False(t, dup, "%q and %q share key %s", prev, p, key)
		seen[key] = p
		require.Len(t, strings.Split(key, "/"), 4, key)
	}
	safe := regexp.MustCompile(`^exports/[A-Za-z0-9._%-]+/[A-Za-z0-9._%-]+/[0-9a-f-]{36}-[0-9]+\.csv$`)
	for key := range seen {
		require.Regexp(t, safe, key)
	}
}

func TestDeletePrefixKeepsOnlyKeep(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := d.open(t)
			other := uuid.New()
			var keys []string
			for attempt := 1; attempt <= 3; attempt++ {
				keys = append(keys, Key("t/1", "p", exportID, attempt, domain.DataExportCSV, domain.DataExportGzip))
			}
			unrelated := []string{
				Key("t/1", "p", other, 1, domain.DataExportCSV, domain.DataExportGzip),
				Key("t", "1/p", exportID, 1, domain.DataExportCSV, domain.DataExportGzip),
			}
			for _, k := range append(append([]string{}, keys...), unrelated...) {
				require.NoError(t, b.WriteAll(ctx, k, []byte(k), nil))
			}

			prefix := KeyPrefix("t/1", "p", exportID)
			require.NoError(t, DeletePrefix(ctx, b, prefix, keys[2]))
			require.Equal(t, []string{keys[2]}, listKeys(t, b, prefix))
			for _, k := range unrelated {
				require.Equal(t, []byte(k), readObject(t, b, k))
			}

			require.NoError(t, DeletePrefix(ctx, b, prefix, ""))
			require.Empty(t, listKeys(t, b, prefix))
			require.Len(t, listKeys(t, b, "exports/"), len(unrelated))

			// Nothing left to delete is not an error.
			require.NoError(t, DeletePrefix(ctx, b, prefix, ""))
		})
	}
}

func TestDeletePrefixRefusesEmptyPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := drivers[0].open(t)
	require.NoError(t, b.WriteAll(ctx, "x", []byte("x"), nil))
	require.Error(t, DeletePrefix(ctx, b, "", ""))
	require.Equal(t, []string{"x"}, listKeys(t, b, ""))
}
