package verify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/aetheriot/aether-audit/domain"
)

// The export is read in chunks of whole lines; workers (one per CPU)
// parse the lines of a chunk and recompute their chain hashes; the chain
// then takes the chunks' results in file order. A line's chain hash
// depends only on its event and the hash the line before it claims, so
// every line but a chunk's first is checked in the worker; the chain
// checks the rest (first lines, lines after a break) itself.

// chunkSize is the size of a chunk of lines read at once.
const chunkSize = 256 << 10

// chunk is a run of whole lines of the export and what its worker found.
type chunk struct {
	// buf holds whole lines, each with its "\n", and after the last one,
	// for the final chunk only, a last line without "\n". It is never
	// written once handed to a worker, until the chain is done with it
	// and it goes back to chunkPool: the parsed strings point into it.
	buf []byte
	// tooLong is a chunk of one line longer than MaxLineBytes (buf empty).
	tooLong bool
	// err ends the export after buf: a damaged gzip stream or a failed
	// read.
	err error
	// lines are the worker's results, in order; done is closed with them.
	lines []parsed
	done  chan struct{}
}

// parsed is one line read back by a worker.
type parsed struct {
	line
	// err is why the line is not an event (nil when it is).
	err error
	// empty: the line is empty; terminated: it ends in "\n".
	empty, terminated bool
	// linked is the line's chain hash recomputed from the chain hash the
	// previous line of the same chunk claims, when linkedOK.
	linked   domain.Hash
	linkedOK bool
	// sameScope: the line before it in the chunk is an event, and of the
	// same tenant and project.
	sameScope bool
}

// chunkPool holds chunks, with their buffers and lines, for reuse: a
// chunk's buffer and its lines are each about a MiB, and allocating them
// afresh for every chunk costs more in zeroing and garbage collection
// than reading the chunk's lines.
var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// newChunk returns a chunk from the pool whose buf has length n and
// capacity at least size.
func newChunk(n, size int) *chunk {
	c := chunkPool.Get().(*chunk)
	if cap(c.buf) < size {
		c.buf = make([]byte, n, size)
	}
	c.buf = c.buf[:n]
	return c
}

// release returns c to the pool once nothing refers to its buffer or
// lines any more (the chain copies what it keeps). Chunks of an unusual
// buffer size are left to the garbage collector.
func release(c *chunk) {
	if cap(c.buf) != chunkSize {
		return
	}
	*c = chunk{buf: c.buf[:0], lines: c.lines[:0]}
	chunkPool.Put(c)
}

// parseChunk reads every line of c.
func parseChunk(c *chunk) {
	b := c.buf
	c.lines = slices.Grow(c.lines[:0], len(b)/512+1)
	var scratch []byte // the hashed bytes of one line, reused
	for len(b) > 0 {
		n := len(c.lines)
		c.lines = append(c.lines, parsed{terminated: true})
		p := &c.lines[n]
		var raw []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			raw, b = b[:i], b[i+1:]
		} else {
			raw, b, p.terminated = b, nil, false
		}
		switch {
		case len(raw) == 0:
			p.empty = true
		default:
			p.err = parseLine(raw, &p.line)
		}
		if p.err == nil && !p.empty && n > 0 {
			if prev := &c.lines[n-1]; prev.err == nil && !prev.empty {
				p.linked, scratch = p.event.ChainHashWith(prev.claimed, scratch)
				p.linkedOK = true
				p.sameScope = p.event.TenantID == prev.event.TenantID && p.event.ProjectID == prev.event.ProjectID
			}
		}
	}
	close(c.done)
}

// readChunks reads r in chunks and sends each to work (for a worker) and
// to ordered (for the chain, in file order), then closes both. It stops
// early when ctx ends.
func readChunks(ctx context.Context, r io.Reader, work, ordered chan<- *chunk) {
	defer close(work)
	defer close(ordered)
	send := func(c *chunk) bool {
		c.done = make(chan struct{})
		if c.tooLong || len(c.buf) == 0 {
			close(c.done) // nothing for a worker
		} else {
			select {
			case work <- c:
			case <-ctx.Done():
				return false
			}
		}
		select {
		case ordered <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var carry []byte // the start of a line continued in the next chunk
	skipping := false
	for {
		c := newChunk(len(carry), max(chunkSize, 2*len(carry)))
		buf := c.buf
		copy(buf, carry)
		var err error
		for len(buf) < cap(buf) && err == nil {
			var n int
			n, err = r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
		}
		if skipping { // the rest of a line that is too long
			i := bytes.IndexByte(buf, '\n')
			if i < 0 && err == nil {
				carry = nil
				continue
			}
			skipping = false
			if i < 0 {
				buf = buf[:0]
			} else {
				buf = buf[i+1:]
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			} else {
				// A damaged stream's partial last line is no line.
				buf = buf[:bytes.LastIndexByte(buf, '\n')+1]
			}
			c.buf, c.err = buf, err
			send(c)
			return
		}
		cut := bytes.LastIndexByte(buf, '\n')
		if cut < 0 {
			if len(buf) > MaxLineBytes {
				if !send(&chunk{tooLong: true}) {
					return
				}
				skipping, carry = true, nil
			} else {
				carry = buf // a long line: read on with a larger buffer
			}
			continue
		}
		// carry stays valid although c goes to the pool once read: only
		// this loop writes pooled buffers, and it copies carry first.
		carry = buf[cut+1:]
		c.buf = buf[:cut+1]
		if !send(c) {
			return
		}
	}
}

// eachLine reads the export from r and calls f for each line, in order,
// with its 1-based number. It returns the error that ended the export, if
// any (a damaged gzip stream or a failed read), with the number of the
// line it ended at; or f's first error. p, and the strings of its event,
// are valid only during the call: the chunk they point into is reused.
func eachLine(ctx context.Context, r io.Reader, f func(n int, p *parsed) error) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	workers := runtime.GOMAXPROCS(0)
	work := make(chan *chunk, workers)
	ordered := make(chan *chunk, 2*workers+2)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				parseChunk(c)
			}
		}()
	}
	go readChunks(ctx, r, work, ordered)
	defer func() {
		cancel()
		for range ordered { // let the reader see the end
		}
		wg.Wait()
	}()
	n := 0
	for c := range ordered {
		<-c.done
		if c.tooLong {
			n++
			if err := f(n, &parsed{err: errLineTooLong, terminated: true}); err != nil {
				return n, err
			}
			continue
		}
		for i := range c.lines {
			n++
			if err := f(n, &c.lines[i]); err != nil {
				return n, err
			}
		}
		if c.err != nil {
			return n + 1, c.err
		}
		release(c)
	}
	return n, ctx.Err()
}
