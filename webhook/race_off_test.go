//go:build !race

package webhook

// raceEnabled tells tests that the race detector is on: sync.Pool then
// drops items at random, so reuse cannot be counted.
const raceEnabled = false
