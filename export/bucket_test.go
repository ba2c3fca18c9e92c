package export

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

func TestOpenBucketFileCreatesDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	b, err := OpenBucket(ctx, "file://"+dir)
	require.NoError(t, err)
	defer b.Close()
	require.DirExists(t, dir)

	key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportUncompressed)
	w, err := CreateObject(ctx, b, key, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
	require.NoError(t, err)
	require.NoError(t, writeRows(w, domain.DataExportAudit, 2))
	res, err := w.Commit()
	require.NoError(t, err)

	path := filepath.Join(dir, filepath.FromSlash(key))
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, digestOf(onDisk), res.Digest)

	// The evidence is the service's own: the object is 0600 and every
	// folder the bucket made is 0700.
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "object file")
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "folder %s", d)
		if d == filepath.Dir(dir) {
			break
		}
	}
}

func TestOpenBucketMem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.WriteAll(ctx, "k", []byte("v"), nil))
	require.Equal(t, []byte("v"), readObject(t, b, "k"))
}

func TestOpenBucketRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ftp://host/dir", "://", "file:///tmp/x?bogus=1"} {
		_, err := OpenBucket(context.Background(), u)
		require.Error(t, err, u)
	}
}

// TestOpenBucketS3Registered checks that the s3 driver is linked in; opening
// contacts nothing, so no service is needed.
func TestOpenBucketS3Registered(t *testing.T) {
	t.Parallel()
	b, err := OpenBucket(context.Background(), "s3://aether-exports?region=eu-central-1")
	require.NoError(t, err)
	require.NoError(t, b.Close())
}
