package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aetheriot/aether-audit/domain"
)

// The exit codes of Run (and of `aether verify`).
const (
	// ExitOK: every line verified (and the checkpoint, when given).
	ExitOK = 0
	// ExitFailed: at least one problem was found.
	ExitFailed = 1
	// ExitUsage: bad usage or unreadable input; nothing was verified.
	ExitUsage = 2
)

// Options are the inputs of one verification.
type Options struct {
	// Export is the path of the NDJSON audit export, plain or gzip.
	Export string
	// Checkpoint is the path of a checkpoint (compact JWS), or "".
	Checkpoint string
	// Keys is the JWKS of the checkpoint keys: a file path or an http(s)
	// URL. Required with Checkpoint.
	Keys string
	// PreviousHash is the chain hash (64 hex digits) of the event before
	// the file's first one, for a file that starts after sequence 1.
	PreviousHash string
	// HTTPClient fetches Keys from a URL (nil: http.DefaultClient, with a
	// timeout either way).
	HTTPClient *http.Client
}

// UsageError is an inconsistent set of options, or a start hash that
// cannot be known: exit code ExitUsage.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Run verifies the export of opts, writes one line per problem and a
// summary to out, and returns the exit code. Bad usage and unreadable
// input are written to errOut.
func Run(ctx context.Context, opts Options, out, errOut io.Writer) int {
	r := newReporter(out)
	err := run(ctx, opts, r)
	if ferr := r.flush(); err == nil && ferr != nil {
		err = &InputError{"output", ferr}
	}
	if err != nil {
		fmt.Fprintln(errOut, "aether verify:", err)
		return ExitUsage
	}
	if r.problems > 0 {
		return ExitFailed
	}
	return ExitOK
}

// run does the work of Run. An error means no verdict (exit ExitUsage).
func run(ctx context.Context, opts Options, r *reporter) error {
	if opts.Export == "" {
		return &UsageError{"--export is required"}
	}
	if (opts.Checkpoint == "") != (opts.Keys == "") {
		return &UsageError{"--checkpoint and --keys go together"}
	}
	var previous *domain.Hash
	if opts.PreviousHash != "" {
		h, err := domain.ParseHash(opts.PreviousHash)
		if err != nil {
			return &UsageError{"--previous-hash: " + err.Error()}
		}
		previous = &h
	}

	// The checkpoint first: its anchor may be the chain's start.
	var (
		cp      *checkpoint
		cpError error
	)
	if opts.Checkpoint != "" {
		jws, err := readFileLimited(opts.Checkpoint, 64<<10)
		if err != nil {
			return &InputError{"checkpoint", err}
		}
		keys, err := loadKeys(ctx, opts.Keys, opts.HTTPClient)
		if err != nil {
			return err
		}
		cp, cpError = verifyCheckpoint(jws, keys)
	}

	start := func(first uint64) (domain.Hash, string, error) {
		switch {
		case previous != nil:
			return *previous, "--previous-hash", nil
		case first == 1:
			return domain.Hash{}, "32 zero bytes: the file starts at sequence 1", nil
		case first == 0:
			return domain.Hash{}, "", &UsageError{"the first line has sequence 0; sequences start at 1"}
		case cp != nil && first == cp.PurgedThroughSequence+1:
			return cp.AnchorHash, "the checkpoint's anchorHash: the file starts after its purgedThroughSequence " +
				strconv.FormatUint(cp.PurgedThroughSequence, 10), nil
		}
		return domain.Hash{}, "", &UsageError{fmt.Sprintf(
			"the file starts at sequence %d, so its chain starts from the chain hash of sequence %d: pass it with --previous-hash",
			first, first-1)}
	}

	er, err := openExport(opts.Export)
	if err != nil {
		return err
	}
	defer er.Close()
	c := newChain(r, start)
	n, err := eachLine(ctx, er.r, c.add)
	switch {
	case err == nil:
	case isDamagedGzip(err):
		c.lines = n
		r.lineProblem(n, c.expected(), "the gzip stream is damaged or cut short here: %v", err)
	case errors.As(err, new(*UsageError)):
		return err
	default:
		return &InputError{"export", err}
	}
	if c.events == 0 {
		r.problem("export: no events")
	}

	cpStatus := "not checked (no --checkpoint)"
	if opts.Checkpoint != "" {
		cpStatus = compareCheckpoint(r, c, cp, cpError)
	}
	printSummary(r, c, er.Compressed, cpStatus)
	return nil
}

// compareCheckpoint reports a checkpoint that failed verification or does
// not match the file's last line, and returns the checkpoint's status.
func compareCheckpoint(r *reporter, c *chain, cp *checkpoint, cpError error) string {
	if cpError != nil {
		r.problem("checkpoint: %v", cpError)
		return "FAILED: " + cpError.Error()
	}
	before := r.problems
	if c.events > 0 {
		if cp.TenantID != c.tenant || cp.ProjectID != c.project {
			r.problem("checkpoint: for tenant/project %s/%s, the file is %s/%s", strconv.Quote(cp.TenantID),
				strconv.Quote(cp.ProjectID), strconv.Quote(c.tenant), strconv.Quote(c.project))
		}
		if cp.Sequence != c.lastSeq {
			r.problem("checkpoint: covers sequence %d, the file ends at sequence %d (line %d)", cp.Sequence, c.lastSeq, c.lines)
		} else if cp.ChainHash != c.lastHash {
			r.problem("checkpoint: chain hash %s at sequence %d, the file's last line says %s", cp.ChainHash, cp.Sequence, c.lastHash)
		}
	}
	if r.problems > before || c.events == 0 {
		return fmt.Sprintf("FAILED: signature valid (key %s), but the checkpoint does not match the file", cp.KeyID)
	}
	return fmt.Sprintf("verified: key %s, sequence %d, chain hash %s, issued %s", cp.KeyID, cp.Sequence, cp.ChainHash, cp.IssuedAt)
}

// printSummary writes the summary, last.
func printSummary(r *reporter, c *chain, gz bool, cpStatus string) {
	format := "plain"
	if gz {
		format = "gzip"
	}
	r.printf("export: %d lines (%s), %d events", c.lines, format, c.events)
	if c.events > 0 {
		r.printf(", sequences %d to %d, %d chain hashes recomputed and matched", c.firstSeq, c.lastSeq, c.verified)
	}
	r.printf("\n")
	if c.started {
		r.printf("start hash: %s (%s)\n", c.startHex, c.startWhy)
		r.printf("last chain hash: %s (sequence %d)\n", c.lastHash, c.lastSeq)
	}
	r.printf("checkpoint: %s\n", cpStatus)
	if r.problems == 0 {
		r.printf("result: OK, the export verifies\n")
	} else {
		r.printf("result: FAILED, %d problems\n", r.problems)
	}
}
