package main

// The verify scenario: `aether verify`'s logic (verify.Run, the function
// the command calls) over an NDJSON audit export of verifyEvents events,
// against a baseline that only reads the same file line by line and
// SHA-256-hashes each line.
//
// The export is built once per run in a temp dir, the way the service
// builds one: drafts normalized and sealed with domain.ChainHead.Append (a
// v2 chain with recordedBy), each event encoded with eventjson.Append. The
// details are typical small objects, already canonical as stored; one event
// in 50 has details with HTML characters, which the event JSON escapes, so
// the verifier re-canonicalizes those through domain.CanonicalJSON.
//
// One untimed read of the file warms the page cache; then ours and the
// baseline run alternately verifyRepeats times each, and the median of
// each side's lines/s is reported. No database is needed.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
	"github.com/aetheriot/aether-audit/verify"
)

const (
	// verifyEvents is the number of events in the export.
	verifyEvents = 1_000_000
	// verifyRepeats is the number of timed runs of each side.
	verifyRepeats = 3
	// verifyMinRatio is the target of ours/baseline lines per second.
	verifyMinRatio = 0.5
)

// runVerify is the verify scenario; it needs no database (e may be nil).
func runVerify(ctx context.Context, _ *env, _ options) ([]result, error) {
	dir, err := os.MkdirTemp("", "aether-bench-verify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.ndjson")
	t0 := time.Now()
	size, err := writeVerifyExport(path, verifyEvents)
	if err != nil {
		return nil, fmt.Errorf("writing the export: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: verify: %d-event export (%.0f MB) written in %s\n",
		verifyEvents, float64(size)/mb, time.Since(t0).Round(time.Second))
	if _, err := hashLines(path); err != nil { // warm the page cache
		return nil, err
	}
	var ours, base []time.Duration
	for range verifyRepeats {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runtime.GC()
		start := time.Now()
		if code := verify.Run(ctx, verify.Options{Export: path}, io.Discard, os.Stderr); code != verify.ExitOK {
			return nil, fmt.Errorf("verify.Run of the untouched export: exit %d", code)
		}
		ours = append(ours, time.Since(start))
		runtime.GC()
		start = time.Now()
		n, err := hashLines(path)
		if err != nil {
			return nil, err
		}
		if n != verifyEvents {
			return nil, fmt.Errorf("baseline read %d lines, want %d", n, verifyEvents)
		}
		base = append(base, time.Since(start))
	}
	o := measurement{units: verifyEvents, ops: 1, elapsed: median(ours)}
	b := measurement{units: verifyEvents, ops: 1, elapsed: median(base)}
	note := fmt.Sprintf("median of %d alternating runs over a %d-event, %.0f MB NDJSON export (GOMAXPROCS %d): ours is verify.Run "+
		"(parse each line, rebuild the event, canonical bytes and chain hash through the domain package, sequence and link checks); "+
		"the baseline reads the file with a 1 MiB bufio.Reader and SHA-256-hashes each line; runs ours %s, baseline %s",
		verifyRepeats, verifyEvents, float64(size)/mb, runtime.GOMAXPROCS(0), fmtDurations(ours), fmtDurations(base))
	r := newResult("verify", o, b, note, throughput("lines/s", o, b, verifyMinRatio))
	r.OursOps, r.BaselineOps = int64(verifyRepeats), int64(verifyRepeats)
	r.Seconds = round(o.elapsed.Seconds(), 1)
	return []result{r}, nil
}

// hashLines is the baseline: read the file line by line and SHA-256 each
// line. It returns the number of lines.
func hashLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n := 0
	var sink [32]byte
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			sum := sha256.Sum256(line)
			sink[0] ^= sum[0]
			n++
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// writeVerifyExport writes an n-event export to path and returns its size.
func writeVerifyExport(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	head := domain.ChainHead{}
	now := time.Now().UTC().Truncate(time.Second)
	recorder := &domain.Recorder{Issuer: "https://idp.example.com/", Subject: "ingest-service", TokenID: "6f1c2a9e0b7d4c3f", ClientID: "plant-gateway"}
	const batch = 500
	drafts := make([]domain.AuditEventDraft, 0, batch)
	var buf []byte
	for done := 0; done < n; {
		drafts = drafts[:0]
		for i := done; i < min(n, done+batch); i++ {
			d := domain.AuditEventDraft{
				ID:         uuid.New(),
				ProjectID:  "bench-verify",
				Action:     "device.firmware.updated",
				OccurredAt: now.Add(-time.Duration(n-i) * time.Millisecond),
				Subject:    domain.Subject{Type: domain.SubjectService, ID: "gateway-" + strconv.Itoa(i%17), DisplayName: "Plant gateway"},
				Resource:   domain.Resource{Type: "device", ID: "device-" + strconv.Itoa(i%5000)},
				Outcome:    domain.OutcomeSuccess,
				Details: json.RawMessage(`{"firmware":"4.2.` + strconv.Itoa(i%10) + `","previous":"4.1.9","sizeBytes":` +
					strconv.Itoa(1<<20+i%4096) + `,"ratio":0.50,"site":"north"}`),
				RecordedBy: recorder,
			}
			if i%10 == 0 {
				d.Correlation = &domain.Correlation{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RequestID: "req-" + strconv.Itoa(i)}
			}
			if i%50 == 0 {
				d.Details = json.RawMessage(`{"note":"<b>restart</b> & check","firmware":"4.2.0"}`)
			}
			if err := d.Normalize("", now); err != nil {
				return 0, err
			}
			drafts = append(drafts, d)
		}
		var events []domain.AuditEvent
		events, head = head.Append("bench", drafts, now)
		for i := range events {
			if buf, err = eventjson.Append(buf[:0], &events[i]); err != nil {
				return 0, err
			}
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return 0, err
			}
		}
		done += len(drafts)
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}

// fmtDurations formats run times in seconds.
func fmtDurations(ds []time.Duration) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += "/"
		}
		out += strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
	return out
}
