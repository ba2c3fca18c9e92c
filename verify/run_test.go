package verify_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/verify"
)

// TestRunAcrossChunks calls verify.Run in the process (so that the race
// detector of `make test` sees its workers) on an export of several
// chunks, with edits spread over it: each is reported once, at its line,
// wherever the chunks begin.
func TestRunAcrossChunks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := sealChain(t, 100, 4900)
	run := func(lines [][]byte, gz bool) (int, string) {
		path := writeExport(t, dir, "big", lines, gz)
		var out, errOut bytes.Buffer
		code := verify.Run(context.Background(), verify.Options{Export: path}, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	lines := exportLines(t, events)
	for _, gz := range []bool{false, true} {
		code, out := run(lines, gz)
		require.Equal(t, verify.ExitOK, code, out)
		require.Contains(t, out, "5000 chain hashes recomputed and matched")
	}

	var want []string
	edited := append([]domain.AuditEvent(nil), events...)
	for i := 50; i < len(events); i += 397 {
		edited[i].Action = "device.firmware.tampered"
		want = append(want, strconv.Itoa(i+1)+":"+strconv.Itoa(i+1))
	}
	lines = exportLines(t, edited)
	lines[4000], lines[4001] = lines[4001], lines[4000]
	want = append(want, "4001:4002", "4002:4001")
	for _, gz := range []bool{false, true} {
		code, out := run(lines, gz)
		require.Equal(t, verify.ExitFailed, code, out)
		got := problemLines(out)
		require.ElementsMatch(t, want, got, out)
	}
}
