package seaweed_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/aetheriot/aether-audit/internal/seaweed"
)

// TestServerServesS3 starts weed mini and talks S3 to it through gocloud
// with the standard credentials chain: a write, a conditional write that
// must fail, a read, a listing.
func TestServerServesS3(t *testing.T) {
	for _, kv := range seaweed.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s := seaweed.New(t, "probe")
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, s.BucketURL())
	require.NoError(t, err)
	defer b.Close()

	require.NoError(t, b.WriteAll(ctx, "a/one.txt", []byte("one"), &blob.WriterOptions{IfNotExist: true, Metadata: map[string]string{"sha256": "x"}}))
	err = b.WriteAll(ctx, "a/one.txt", []byte("two"), &blob.WriterOptions{IfNotExist: true})
	require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err), "a conditional write of an existing key fails: %v", err)
	got, err := b.ReadAll(ctx, "a/one.txt")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	attrs, err := b.Attributes(ctx, "a/one.txt")
	require.NoError(t, err)
	require.Equal(t, "x", attrs.Metadata["sha256"])
	it := b.List(&blob.ListOptions{Prefix: "a/"})
	obj, err := it.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "a/one.txt", obj.Key)

	// Without credentials the server refuses: the chain is really used.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	wrong, err := blob.OpenBucket(ctx, s.BucketURL())
	require.NoError(t, err)
	defer wrong.Close()
	require.Error(t, wrong.WriteAll(ctx, "a/two.txt", []byte("x"), nil))
}
