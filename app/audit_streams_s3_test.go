package app_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/internal/seaweed"
	"github.com/aetheriot/aether-audit/streamsink"
)

// TestAuditStreamS3WritesVerifiableObjectsToARealS3Server streams two
// projects to SeaweedFS: objects of at most ObjectEvents events whose
// names list the history in order, each with its digest and last chain
// hash in metadata, and a manifest per project.
func TestAuditStreamS3WritesVerifiableObjectsToARealS3Server(t *testing.T) {
	for _, kv := range seaweed.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s3 := seaweed.New(t, "audit-streams")
	b := setupStreams(t, streamOpts{streams: app.StreamConfig{
		OpenBucket: export.OpenBucket, ObjectEvents: 100, ObjectMaxAge: 300 * time.Millisecond,
	}})
	bucketURL := s3.BucketURL() + "&prefix=tenant-a%2F"
	// The development relaxations of webhooks let the endpoint be
	// http://127.0.0.1.
	_, err := b.app.CreateAuditStream(context.Background(), b.admin, app.CreateAuditStreamInput{ProjectIDs: []string{"p1", "p2"},
		Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamS3, URL: bucketURL}})
	requireCode(t, err, app.CodeBadUserInput) // http endpoint, disable_https: refused without the relaxations
	b = setupStreams(t, streamOpts{streams: app.StreamConfig{
		OpenBucket: export.OpenBucket, ObjectEvents: 100, ObjectMaxAge: 300 * time.Millisecond,
	}, allowHTTP: true})
	b.record(t, "p1", "door.opened", 230)
	b.record(t, "p2", "door.opened", 40)
	created, err := b.app.CreateAuditStream(context.Background(), b.admin, app.CreateAuditStreamInput{ProjectIDs: []string{"p1", "p2"},
		Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamS3, URL: bucketURL}})
	require.NoError(t, err)
	require.Nil(t, created.SigningSecret)
	b.run(t)
	b.record(t, "p1", "door.closed", 15) // live, after the backfill
	heads := map[string]uint64{"p1": b.head(t, "p1"), "p2": b.head(t, "p2")}
	b.awaitCaughtUp(t, created.Stream.Stream.ID.String(), heads)

	ctx := context.Background()
	bucket, err := export.OpenBucket(ctx, s3.BucketURL())
	require.NoError(t, err)
	defer bucket.Close()
	for p, head := range heads {
		prefix := "tenant-a/" + streamsink.ObjectPrefix("t1", p)
		it := bucket.List(&blob.ListOptions{Prefix: prefix})
		var seqs []uint64
		var lastChain string
		for {
			obj, err := it.Next(ctx)
			if err != nil {
				break
			}
			if strings.HasSuffix(obj.Key, "manifest.json") {
				continue
			}
			events, meta, err := streamsink.ReadObject(ctx, bucket, obj.Key)
			require.NoError(t, err, "the object's bytes match its sha256 metadata")
			require.LessOrEqual(t, len(events), 100, "ObjectEvents bounds an object")
			first, last := events[0], events[len(events)-1]
			require.Equal(t, prefix+streamsink.ObjectKey("t1", p, first.Sequence, last.Sequence)[len(streamsink.ObjectPrefix("t1", p)):], obj.Key)
			require.Equal(t, last.ChainHash, meta[streamsink.MetaChainHash])
			require.Equal(t, strconv.Itoa(len(events)), meta[streamsink.MetaEvents])
			for _, e := range events {
				require.Equal(t, p, e.ProjectID)
				seqs = append(seqs, e.Sequence)
			}
			lastChain = last.ChainHash
		}
		requireComplete(t, seqs, 1, head)
		raw, err := bucket.ReadAll(ctx, prefix+"manifest.json")
		require.NoError(t, err)
		require.Contains(t, string(raw), `"lastSequence":"`+strconv.FormatUint(head, 10)+`"`)
		require.Contains(t, string(raw), lastChain)
	}
}
