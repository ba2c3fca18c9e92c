package verify

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/aetheriot/aether-audit/domain"
)

// chain follows the export line by line: dense sequences, one tenant and
// project, and each line's chain hash recomputed from its event and the
// previous line's chain hash.
//
// Each line is checked against the hash the previous line claims, so that
// one edited event is reported once, at its own line, and the lines after
// it still verify. After a break the chain goes on sensibly: a line whose
// sequence jumps ahead is reported as a gap and the chain continues from
// it; a line whose sequence goes back is reported as out of order and
// skipped; an unreadable line takes the place of the expected sequence and
// the next line's hash, having no known predecessor, is not recomputed.
type chain struct {
	r *reporter
	// start returns the hash before the first event, given its sequence;
	// an error is bad usage (the start is unknown).
	start func(first uint64) (domain.Hash, string, error)

	lines    int    // lines read
	events   int    // lines read as events
	verified int    // events whose chain hash was recomputed and matched
	firstSeq uint64 // sequence of the first event
	startHex string // the start hash, hex
	startWhy string // where the start hash came from

	tenant, project string // of the first event
	// scopeLine is the last line found to be of tenant and project.
	scopeLine int

	started   bool
	prevSeq   uint64      // the sequence the chain is at
	prev      domain.Hash // the chain hash claimed for prevSeq
	prevKnown bool        // prev is a hash read from a line (or the start)
	prevLine  int         // the line prev was read from (0: the start)

	lastSeq  uint64      // sequence of the last line read as an event
	lastHash domain.Hash // its claimed chain hash
}

func newChain(r *reporter, start func(uint64) (domain.Hash, string, error)) *chain {
	return &chain{r: r, start: start}
}

// expected is the sequence the next line should have, as text.
func (c *chain) expected() string {
	if !c.started {
		return "?"
	}
	return strconv.FormatUint(c.prevSeq+1, 10)
}

// unreadable reports line n as unreadable (cut short, not an event); the
// chain assumes it held the expected sequence.
func (c *chain) unreadable(n int, seq uint64, why string) {
	s := c.expected()
	if seq != 0 {
		s = strconv.FormatUint(seq, 10)
	}
	c.r.lineProblem(n, s, "%s", why)
	if c.started {
		c.prevSeq++
		c.prevKnown = false
	}
}

// add checks line n (1-based), as a worker read it. An error is bad
// usage: the chain's start hash is unknown.
func (c *chain) add(n int, p *parsed) error {
	c.lines = n
	switch {
	case p.empty:
		c.unreadable(n, 0, "empty line")
		return nil
	case p.err != nil:
		why := "not an event: " + p.err.Error()
		if p.err == errLineTooLong {
			why = p.err.Error()
		} else if !p.terminated {
			why = "cut short (no newline at the end of the file): " + why
		}
		c.unreadable(n, p.event.Sequence, why)
		return nil
	}
	e := &p.event
	// The sequence as text, for problems only.
	seq := func() string { return strconv.FormatUint(e.Sequence, 10) }
	if !p.terminated {
		c.r.lineProblem(n, seq(), "cut short: no newline at the end of the file")
	}
	c.events++
	c.lastSeq, c.lastHash = e.Sequence, p.claimed
	if !c.started {
		start, why, err := c.start(e.Sequence)
		if err != nil {
			return err
		}
		c.started = true
		c.firstSeq = e.Sequence
		// The event's strings point into the export's buffer: copy.
		c.tenant, c.project = strings.Clone(e.TenantID), strings.Clone(e.ProjectID)
		c.prevSeq, c.prev, c.prevKnown, c.prevLine = e.Sequence-1, start, true, 0
		c.startHex, c.startWhy = hex.EncodeToString(start[:]), why
	}
	// A line the worker found of the tenant and project of the line
	// before it, which was, needs no comparison here.
	if p.sameScope && c.scopeLine == n-1 {
		c.scopeLine = n
	} else if e.TenantID == c.tenant && e.ProjectID == c.project {
		c.scopeLine = n
	} else {
		c.r.lineProblem(n, seq(), "tenant/project is %s/%s, not %s/%s as on the first line",
			strconv.Quote(e.TenantID), strconv.Quote(e.ProjectID), strconv.Quote(c.tenant), strconv.Quote(c.project))
	}
	switch want := c.prevSeq + 1; {
	case e.Sequence == want:
		if c.prevKnown {
			got := p.linked
			if !p.linkedOK || c.prevLine != n-1 {
				// Not chained from the line before it (a chunk's first
				// line, or a line after a skipped one): recompute here.
				got = e.ComputeChainHash(c.prev)
			}
			if got == p.claimed {
				c.verified++
			} else {
				c.r.lineProblem(n, seq(), "chain hash mismatch: the event and the previous chain hash give %s, the line says %s", got, p.claimed)
			}
		}
	case e.Sequence > want:
		missing := e.Sequence - want
		c.r.lineProblem(n, seq(), "sequence gap: expected %d, found %d (%d missing)", want, e.Sequence, missing)
	default:
		c.r.lineProblem(n, seq(), "out of order: sequence %d after %d (expected %d)", e.Sequence, c.prevSeq, want)
		return nil // the chain stays at prevSeq
	}
	c.prevSeq, c.prev, c.prevKnown, c.prevLine = e.Sequence, p.claimed, true, n
	return nil
}
