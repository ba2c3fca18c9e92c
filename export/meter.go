package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync/atomic"
)

// ErrTooLarge is returned by a Write method or Commit of an ObjectWriter when
// the stored object would pass its size limit. Nothing past the limit is
// written; the caller aborts the object.
var ErrTooLarge = errors.New("export: object would pass its size limit")

// meter sits just above the storage writer: it sees exactly the bytes that
// are stored, hashes and counts them, enforces the size limit and stops on
// cancellation.
type meter struct {
	ctx   context.Context
	dst   io.Writer
	sum   hash.Hash
	limit uint64 // 0 means unbounded
	n     atomic.Uint64
}

// newMeter returns a meter writing to dst that refuses to let more than
// limit bytes through (no bound when limit is 0).
func newMeter(ctx context.Context, dst io.Writer, limit uint64) *meter {
	return &meter{ctx: ctx, dst: dst, sum: sha256.New(), limit: limit}
}

// Write passes p on whole, or refuses it whole with ErrTooLarge when it would
// take the total past the limit.
func (m *meter) Write(p []byte) (int, error) {
	if err := m.ctx.Err(); err != nil {
		return 0, fmt.Errorf("export: write cancelled: %w", err)
	}
	n := m.n.Load()
	if m.limit > 0 && uint64(len(p)) > m.limit-n {
		return 0, fmt.Errorf("%w: %d stored bytes plus %d exceed the limit of %d", ErrTooLarge, n, len(p), m.limit)
	}
	written, err := m.dst.Write(p)
	m.sum.Write(p[:written])
	m.n.Add(uint64(written))
	if err != nil {
		return written, fmt.Errorf("export: write to storage: %w", err)
	}
	return written, nil
}

// bytes returns how many bytes have passed so far. It is safe to call
// concurrently with Write.
func (m *meter) bytes() uint64 { return m.n.Load() }

// digest returns "sha256:" and the lower-case hex SHA-256 of the bytes that
// have passed.
func (m *meter) digest() string { return "sha256:" + hex.EncodeToString(m.sum.Sum(nil)) }
