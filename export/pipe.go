package export

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// pipeDepth is how many chunks may wait between the two sides of a pipe.
const pipeDepth = 4

// pipe hands the encoded bytes, in the chunks its writer flushes, to a
// goroutine that writes them on (compressing, hashing, counting and
// storing), so that encoding rows and storing them run on two cores. Its
// first error is returned by every later Write and by flush. Write, flush
// and close are called by one goroutine at a time (the ObjectWriter holds
// its lock).
type pipe struct {
	ctx     context.Context
	dst     io.Writer
	work    chan []byte // a nil chunk asks for a flush reply
	free    chan []byte
	flushed chan error
	done    chan struct{}
	closed  bool

	mu  sync.Mutex
	err error
}

func newPipe(ctx context.Context, dst io.Writer) *pipe {
	p := &pipe{ctx: ctx, dst: dst, work: make(chan []byte, pipeDepth), free: make(chan []byte, pipeDepth+1),
		flushed: make(chan error, 1), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *pipe) run() {
	defer close(p.done)
	for chunk := range p.work {
		if chunk == nil {
			p.flushed <- p.failed()
			continue
		}
		if p.failed() == nil {
			if _, err := p.dst.Write(chunk); err != nil {
				p.fail(err)
			}
		}
		select {
		case p.free <- chunk:
		default:
		}
	}
}

func (p *pipe) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pipe) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

// Write hands a copy of b to the goroutine.
func (p *pipe) Write(b []byte) (int, error) {
	if err := p.failed(); err != nil {
		return 0, err
	}
	var chunk []byte
	select {
	case chunk = <-p.free:
	default:
	}
	chunk = append(chunk[:0], b...)
	select {
	case p.work <- chunk:
		return len(b), nil
	case <-p.ctx.Done():
		return 0, fmt.Errorf("export: write cancelled: %w", p.ctx.Err())
	}
}

// flush waits until every chunk handed over is written, and returns the
// first error.
func (p *pipe) flush() error {
	select {
	case p.work <- nil:
	case <-p.ctx.Done():
		return fmt.Errorf("export: write cancelled: %w", p.ctx.Err())
	}
	select {
	case err := <-p.flushed:
		return err
	case <-p.ctx.Done():
		return fmt.Errorf("export: write cancelled: %w", p.ctx.Err())
	}
}

// close ends the goroutine once it has written (or, after an error or a
// cancellation, dropped) what it holds. It is safe to call more than once.
func (p *pipe) close() {
	if p.closed {
		return
	}
	p.closed = true
	close(p.work)
	<-p.done
}
