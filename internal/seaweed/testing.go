package seaweed

import (
	"bytes"
	"context"
	"testing"
)

// New starts a server with bucket for the test t, in a folder of t's, and
// stops it when t ends. It fails t when the server cannot start (after the
// binary is built, if it had to be: run `make test-deps` first to keep that
// out of the tests' time).
func New(t testing.TB, bucket string) *Server {
	t.Helper()
	var log bytes.Buffer
	s, err := Start(context.Background(), Options{Dir: t.TempDir(), Bucket: bucket, Log: &log})
	if err != nil {
		t.Fatalf("starting the S3 server: %v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("S3 server log:\n%s", tail(s.Log(), 8<<10))
		}
	})
	return s
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
