package store_test

import (
	"testing"
	"time"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// testInstant is the fixed "now" of store tests that need no real clock.
var testInstant = time.Date(2026, 12, 2, 10, 20, 30, 0, time.UTC)

// parallelStore is the preamble of a store test that runs in parallel on a
// fresh migrated database of its own: it marks t parallel and returns a
// Store on that database, and testInstant.
func parallelStore(t *testing.T) (*store.Store, time.Time) {
	t.Helper()
	t.Parallel()
	return store.New(storetest.NewPool(t)), testInstant
}
