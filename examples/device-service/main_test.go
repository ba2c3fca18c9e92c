package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/internal/aethertest"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { aethertest.Main(m) }

// TestEventsWaitWhileAetherIsDown runs the service against a real Aether:
// firmware updates answer while Aether is down, and their events arrive in
// order once it is back.
func TestEventsWaitWhileAetherIsDown(t *testing.T) {
	srv := aethertest.Start(t)
	token := srv.Token(t, "dev", []string{"demo"}, "audit:write,audit:read", "device-service", time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg := config{databaseURL: storetest.NewEmptyDatabase(t), aetherURL: srv.URL, token: token, project: "demo", addr: addr}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	aether, err := client.New(srv.URL, client.Options{Token: token})
	require.NoError(t, err)

	update := func(device, version string) {
		t.Helper()
		var resp *http.Response
		aethertest.Await(t, 30*time.Second, "the service answers", func() bool {
			req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/devices/"+device+"/firmware",
				strings.NewReader(`{"version":"`+version+`","actor":"alice"}`))
			resp, err = http.DefaultClient.Do(req)
			return err == nil
		})
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	arrived := func() []client.Event {
		var evs []client.Event
		for ev, err := range aether.Search(context.Background(), "demo", client.SearchOptions{}) {
			if err != nil {
				return nil
			}
			evs = append(evs, ev)
		}
		return evs
	}

	update("dev-7", "1.0.0")
	aethertest.Await(t, 30*time.Second, "the first event arrives", func() bool { return len(arrived()) == 1 })

	srv.Kill(t)
	update("dev-7", "1.1.0")
	update("dev-8", "2.0.0")
	update("dev-7", "1.2.0")
	srv.Restart(t)
	aethertest.Await(t, 60*time.Second, "the waiting events arrive", func() bool { return len(arrived()) == 4 })
	evs := arrived()
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Resource.ID+" "+string(ev.Details))
	}
	require.Equal(t, []string{
		`dev-7 {"from":null,"to":"1.0.0"}`,
		`dev-7 {"from":"1.0.0","to":"1.1.0"}`,
		`dev-8 {"from":null,"to":"2.0.0"}`,
		`dev-7 {"from":"1.1.0","to":"1.2.0"}`,
	}, got)
}
