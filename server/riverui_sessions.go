package server

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/aetheriot/aether-audit/app"
)

// Bounds of River UI browser sessions.
const (
	// riverUISessionTTL is the longest a River UI session lives; it ends
	// sooner when the token it was opened with expires.
	riverUISessionTTL = 8 * time.Hour
	// maxRiverUISessions bounds the sessions a process keeps; past it,
	// opening one ends the session closest to its end.
	maxRiverUISessions = 1024
)

// riverUISessions are the River UI browser sessions of this process: the
// cookie holds an opaque random id, never the token; the id maps to the
// identity verified at sign-in until the session's end, kept here, so that
// signing out ends the session for good. Sessions live in the process that
// opened them (behind several processes, route /riverui/ to one of them, or
// send the bearer header).
type riverUISessions struct {
	mu   sync.Mutex
	byID map[string]riverUISession
}

// riverUISession is one signed-in browser.
type riverUISession struct {
	id      app.Identity
	expires time.Time
}

// open starts a session for id, signed in at now, and returns its opaque
// id and its end.
func (s *riverUISessions) open(id app.Identity, now time.Time) (string, time.Time) {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand does not fail
	sid := base64.RawURLEncoding.EncodeToString(raw[:])
	expires := now.Add(riverUISessionTTL)
	if !id.ExpiresAt.IsZero() && id.ExpiresAt.Before(expires) {
		expires = id.ExpiresAt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]riverUISession{}
	}
	if len(s.byID) >= maxRiverUISessions {
		s.evict(now)
	}
	s.byID[sid] = riverUISession{id: id, expires: expires}
	return sid, expires
}

// evict drops the ended sessions and, if none had ended, the one closest
// to its end. s.mu is held.
func (s *riverUISessions) evict(now time.Time) {
	var soonest string
	for sid, sess := range s.byID {
		if !now.Before(sess.expires) {
			delete(s.byID, sid)
			soonest = ""
			continue
		}
		if soonest == "" || sess.expires.Before(s.byID[soonest].expires) {
			soonest = sid
		}
	}
	if len(s.byID) >= maxRiverUISessions && soonest != "" {
		delete(s.byID, soonest)
	}
}

// identity returns the identity of the session sid at now; false when
// there is no such session or it has ended.
func (s *riverUISessions) identity(sid string, now time.Time) (app.Identity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[sid]
	if !ok {
		return app.Identity{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.byID, sid)
		return app.Identity{}, false
	}
	return sess.id, true
}

// close ends the session sid.
func (s *riverUISessions) close(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sid)
}
