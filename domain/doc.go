// Package domain holds Aether Audit's pure values and state machines: the
// audit event and its validation, its canonical encoding and hash chain.
// It performs no I/O, writes no SQL and imports nothing else of ours.
package domain
