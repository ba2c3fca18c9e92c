package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/internal/seaweed"
)

// TestExportToRealS3Server runs the export path against a real S3 server
// (SeaweedFS on loopback, credentials from the standard AWS chain): the
// object is written with its digest, the signed download link serves its
// bytes (whole and by range, read back from S3), and expiry deletes it.
func TestExportToRealS3Server(t *testing.T) {
	for _, kv := range seaweed.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s3 := seaweed.New(t, "exports")
	ctx := context.Background()
	bucket, err := export.OpenBucket(ctx, s3.BucketURL()+"&prefix=aether%2F")
	require.NoError(t, err)
	b := setupExports(t, func(cfg *app.ExportConfig) { cfg.Bucket = bucket })
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	b.recordN(t, tok, 40, "device.firmware.updated")

	queued := b.requestExport(t, tok, exportInput(map[string]any{"compression": "GZIP"}))
	b.runExport(t, tenantA, queued.ID)
	ready := b.getExport(t, tok, queued.ID)
	require.NotNil(t, ready)
	require.Equal(t, "READY", ready.State, "failure: %v", ready.FailureReason)
	require.Regexp(t, sha256Digest, *ready.ContentDigest)

	// The object is in the S3 bucket, under the prefix, as described.
	raw, err := export.OpenBucket(ctx, s3.BucketURL())
	require.NoError(t, err)
	defer raw.Close()
	stored, err := raw.ReadAll(ctx, "aether/"+*ready.ObjectRef)
	require.NoError(t, err, "object %s", *ready.ObjectRef)
	sum := sha256.Sum256(stored)
	require.Equal(t, *ready.ContentDigest, "sha256:"+hex.EncodeToString(sum[:]))
	attrs, err := raw.Attributes(ctx, "aether/"+*ready.ObjectRef)
	require.NoError(t, err)
	require.Equal(t, "application/gzip", attrs.ContentType)

	// The signed download link serves exactly those bytes, from S3.
	dlURL, _ := b.createDownload(t, tok, ready.ID, nil)
	resp, body := fetch(t, dlURL)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, stored, body)
	zr, err := gzip.NewReader(bytes.NewReader(body))
	require.NoError(t, err)
	lines, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, 40, strings.Count(string(lines), "\n"))
	resp, part := fetch(t, dlURL, "Range", "bytes=5-14")
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", part)
	require.Equal(t, stored[5:15], part)
	// A tampered link is refused.
	prefix, capability := tokenOfURL(t, dlURL)
	requireProblem(t, getURL(t, prefix+flipAt(capability, len(capability)-1)), http.StatusForbidden, "FORBIDDEN")

	// Expiry deletes the object from S3.
	b.expireExport(t, tok, ready.ID)
	require.NoError(t, b.app.DeleteExportObject(ctx, *ready.ObjectRef))
	exists, err := raw.Exists(ctx, "aether/"+*ready.ObjectRef)
	require.NoError(t, err)
	require.False(t, exists)
}
