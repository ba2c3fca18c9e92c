package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/internal/seaweed"
	"github.com/aetheriot/aether-audit/streamsink"
)

// TestStreamS3CompleteThroughKillOutageAndPostgresRestart is the scenario of
// the HTTPS stream against a real S3 server (SeaweedFS): the process is
// killed while an object is on its way, S3 hangs for a while (its
// processes stopped) and PostgreSQL restarts; every project's objects
// still hold every event, each object's bytes match its digest, and the
// only repeated sequences are of an object written again.
func TestStreamS3CompleteThroughKillOutageAndPostgresRestart(t *testing.T) {
	t.Parallel()
	for _, kv := range seaweed.Env() {
		k, v, _ := strings.Cut(kv, "=")
		// The test reads the bucket with the same credentials chain.
		require.NoError(t, os.Setenv(k, v))
	}
	s3 := seaweed.New(t, "chaos-stream")
	bucket, err := export.OpenBucket(context.Background(), s3.BucketURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	sink := &s3Sink{s3: s3, bucket: bucket, objects: map[string][]uint64{}}
	streamChaos(t, sink, append(seaweed.Env(), "AETHER_STREAM_OBJECT_EVENTS=5000", "AETHER_STREAM_OBJECT_MAX_AGE=1s"))
	// Each project's manifest names its last object.
	for _, p := range []string{"p1", "p2", "p3"} {
		raw, err := bucket.ReadAll(context.Background(), streamsink.ManifestKey(tenant, p))
		require.NoError(t, err)
		require.Contains(t, string(raw), `"lastObject":"`+streamsink.ObjectPrefix(tenant, p))
	}
}

// s3Sink is the chaosSink of an S3 stream: the objects of the bucket.
type s3Sink struct {
	s3     *seaweed.Server
	bucket *blob.Bucket

	mu sync.Mutex
	// objects caches the sequences of each object read (objects are
	// written once).
	objects map[string][]uint64
}

// input implements chaosSink.
func (s *s3Sink) input() map[string]any { return map[string]any{"type": "S3", "url": s.s3.BucketURL()} }

// arrivals implements chaosSink: each project's objects in key order (the
// order of their first sequence), each read and checked against its
// digest.
func (s *s3Sink) arrivals(t *testing.T) map[string][]uint64 {
	t.Helper()
	ctx := context.Background()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]uint64{}
	for _, p := range []string{"p1", "p2", "p3"} {
		it := s.bucket.List(&blob.ListOptions{Prefix: streamsink.ObjectPrefix(tenant, p)})
		for {
			obj, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if strings.HasSuffix(obj.Key, "manifest.json") {
				continue
			}
			seqs, ok := s.objects[obj.Key]
			if !ok {
				events, meta, err := streamsink.ReadObject(ctx, s.bucket, obj.Key)
				require.NoError(t, err, "the object's bytes match its sha256 metadata")
				for _, e := range events {
					require.Equal(t, p, e.ProjectID)
					seqs = append(seqs, e.Sequence)
				}
				require.Equal(t, events[len(events)-1].ChainHash, meta[streamsink.MetaChainHash])
				require.Equal(t, strconv.FormatUint(seqs[0], 10), meta[streamsink.MetaFirstSequence])
				s.objects[obj.Key] = seqs
			}
			out[p] = append(out[p], seqs...)
		}
	}
	return out
}

// holdInFlight implements chaosSink: S3 is paused, and the object is in
// flight once a request to it waits unread on one of its connections.
func (s *s3Sink) holdInFlight(t *testing.T, kick func()) (release func()) {
	t.Helper()
	require.NoError(t, s.s3.Pause())
	kick()
	port, err := strconv.Atoi(s.s3.Endpoint[strings.LastIndexByte(s.s3.Endpoint, ':')+1:])
	require.NoError(t, err)
	await(t, time.Minute, "a request waits unread at the paused S3 server", func() bool { return unreadAt(t, port) })
	return func() { require.NoError(t, s.s3.Resume()) }
}

// setDown implements chaosSink: S3 hangs (paused) while down.
func (s *s3Sink) setDown(t *testing.T, down bool) {
	t.Helper()
	if down {
		require.NoError(t, s.s3.Pause())
	} else {
		require.NoError(t, s.s3.Resume())
	}
}

// unreadAt reports whether a TCP connection accepted on 127.0.0.1:port has
// bytes its server has not read (/proc/net/tcp: established, local port
// port, a receive queue above zero).
func unreadAt(t *testing.T, port int) bool {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	require.NoError(t, err)
	defer f.Close()
	local := fmt.Sprintf("0100007F:%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue …
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[1] != local || fields[3] != "01" {
			continue
		}
		_, rx, _ := strings.Cut(fields[4], ":")
		if n, err := strconv.ParseUint(rx, 16, 64); err == nil && n > 0 {
			return true
		}
	}
	return false
}
