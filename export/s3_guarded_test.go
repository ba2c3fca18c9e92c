package export_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/gcerrors"

	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/internal/seaweed"
	"github.com/aetheriot/aether-audit/webhook"
)

// TestOpenGuardedBucketSendsS3RequestsThroughTheSSRFPolicy writes to a real
// S3 server (SeaweedFS on 127.0.0.1) through a guarded bucket: with the
// development relaxations that allow loopback, the object is written and
// read back; with the production policy, the same bucket URL opens but
// every request is refused at dial time and nothing reaches the server.
func TestOpenGuardedBucketSendsS3RequestsThroughTheSSRFPolicy(t *testing.T) {
	for _, kv := range seaweed.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s3 := seaweed.New(t, "guarded")
	ctx := context.Background()

	relaxed := webhook.NewSender(webhook.SenderConfig{AllowHTTP: true,
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	b, err := export.OpenGuardedBucket(ctx, s3.BucketURL()+"&prefix=t1%2F", relaxed.GuardedClient())
	require.NoError(t, err)
	require.NoError(t, b.WriteAll(ctx, "allowed.txt", []byte("through the guard"), nil))
	got, err := b.ReadAll(ctx, "allowed.txt")
	require.NoError(t, err)
	require.Equal(t, "through the guard", string(got))
	require.NoError(t, b.Close())

	strict := webhook.NewSender(webhook.SenderConfig{AllowHTTP: true})
	b, err = export.OpenGuardedBucket(ctx, s3.BucketURL(), strict.GuardedClient())
	require.NoError(t, err)
	err = b.WriteAll(ctx, "refused.txt", []byte("must not arrive"), nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "refused")
	require.NoError(t, b.Close())

	// The server never saw the refused write; the unguarded opener (the
	// operator's own bucket) still reaches it.
	plain, err := export.OpenBucket(ctx, s3.BucketURL())
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.ReadAll(ctx, "refused.txt")
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err), "%v", err)
	got, err = plain.ReadAll(ctx, "t1/allowed.txt")
	require.NoError(t, err)
	require.Equal(t, "through the guard", string(got))
}

// TestOpenGuardedBucketRefusesBadParameters: a malformed boolean is an
// error, not a silent default.
func TestOpenGuardedBucketRefusesBadParameters(t *testing.T) {
	s := webhook.NewSender(webhook.SenderConfig{})
	_, err := export.OpenGuardedBucket(context.Background(), "s3://b?region=us-east-1&use_path_style=maybe", s.GuardedClient())
	require.ErrorContains(t, err, "use_path_style")
}
