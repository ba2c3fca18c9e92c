package verify

import (
	"bufio"
	"fmt"
	"io"
)

// maxPrinted is how many problems are printed; the rest are only counted.
const maxPrinted = 1000

// reporter prints problems, one a line, and counts them.
type reporter struct {
	w        *bufio.Writer
	problems int
}

func newReporter(w io.Writer) *reporter {
	return &reporter{w: bufio.NewWriter(w)}
}

// lineProblem reports a problem with export line n, of sequence seq ("?"
// when unknown).
func (r *reporter) lineProblem(n int, seq string, format string, args ...any) {
	r.problem(fmt.Sprintf("line %d: sequence %s: ", n, seq)+format, args...)
}

// problem reports a problem not tied to one line, e.g. of the checkpoint.
func (r *reporter) problem(format string, args ...any) {
	r.problems++
	if r.problems <= maxPrinted {
		fmt.Fprintf(r.w, format+"\n", args...)
	} else if r.problems == maxPrinted+1 {
		fmt.Fprintf(r.w, "(more problems are counted, not printed)\n")
	}
}

// printf writes summary text.
func (r *reporter) printf(format string, args ...any) {
	fmt.Fprintf(r.w, format, args...)
}

func (r *reporter) flush() error { return r.w.Flush() }
