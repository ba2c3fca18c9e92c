package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

// TestRiverUISessions: a session ends with its token or after
// riverUISessionTTL, whichever is sooner, ends for good when closed, and a
// full table makes room by ending the session closest to its end.
func TestRiverUISessions(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var s riverUISessions
	admin := app.Identity{TenantID: "t", Subject: "ops", ExpiresAt: now.Add(time.Minute)}

	sid, expires := s.open(admin, now)
	require.Equal(t, admin.ExpiresAt, expires, "no later than the token")
	got, ok := s.identity(sid, now.Add(30*time.Second))
	require.True(t, ok)
	require.Equal(t, admin, got)
	_, ok = s.identity(sid, now.Add(2*time.Minute))
	require.False(t, ok, "ended with the token")

	long := admin
	long.ExpiresAt = now.Add(100 * time.Hour)
	sid, expires = s.open(long, now)
	require.Equal(t, now.Add(riverUISessionTTL), expires, "at most riverUISessionTTL")
	s.close(sid)
	_, ok = s.identity(sid, now)
	require.False(t, ok, "closed for good")

	first, _ := s.open(admin, now)
	for i := range maxRiverUISessions {
		later := long
		later.Subject = "ops-" + time.Duration(i).String()
		s.open(later, now)
	}
	require.LessOrEqual(t, len(s.byID), maxRiverUISessions)
	_, ok = s.identity(first, now)
	require.False(t, ok, "the session closest to its end made room")
}
