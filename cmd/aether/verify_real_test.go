package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestVerifyRealExport runs the whole offline path on a real server: events
// with details that trip naive encoders are recorded, an AUDIT export by
// sequence range runs, `aether export download` fetches it, its checkpoint
// comes from the API and the keys from the public JWKS endpoint. Then
// `aether verify` and the Node.js example (examples/verify-node) must both
// accept it, and both must reject the same tampered copy at the same line.
func TestVerifyRealExport(t *testing.T) {
	s := serveReady(t)
	tok := mintToken(t, s.dir, "--tenant", "acme", "--project", "plant-1", "--subject", "gateway",
		"--permissions", "audit:read,audit:write,exports:read,exports:write,exports:download")

	details := []string{
		`{"price":1.50,"big":12345678901234567890,"exp":1e2,"neg":-0.0}`,
		`{"html":"<b>&amp;</b>","sep":"a\u2028b","ctl":"\u0001"}`,
		`{"dup":1,"dup":2,"\uff61":"halfwidth","\ud83d\ude00":"emoji"}`,
		`{"nested":{"z":[1,{"b":2,"a":1}],"a":null},"text":"Grüße"}`,
	}
	var events []map[string]any
	for i := range 12 {
		// Raw text, so numbers and repeated keys reach the server as written.
		d := json.RawMessage(details[i%len(details)])
		events = append(events, map[string]any{
			"projectId": "plant-1", "action": "device.updated", "occurredAt": "2026-11-30T10:00:00.5Z",
			"subject":  map[string]any{"type": "USER", "id": "u-1"},
			"resource": map[string]any{"type": "device", "id": fmt.Sprintf("d-%d", i)},
			"outcome":  "SUCCESS", "details": d,
		})
	}
	body, err := json.Marshal(map[string]any{"query": `mutation($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { sequence } } }`,
		"variables": map[string]any{"in": map[string]any{"events": events}}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, s.base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.NotContains(t, string(raw), `"errors"`, "%s", raw)

	dir := t.TempDir()
	export, checkpointJWS := exportAndDownload(t, s, tok, dir, "export.ndjson.gz")
	checkpoint := filepath.Join(dir, "checkpoint.jws")
	require.NoError(t, os.WriteFile(checkpoint, []byte(checkpointJWS), 0o600))
	keysURL := s.base + "/.well-known/aether/checkpoint-keys"
	keysResp, err := http.Get(keysURL)
	require.NoError(t, err)
	keys, err := io.ReadAll(keysResp.Body)
	keysResp.Body.Close()
	require.NoError(t, err)
	keysFile := filepath.Join(dir, "keys.json")
	require.NoError(t, os.WriteFile(keysFile, keys, 0o600))

	stdout, stderr, code := run(t, nil, "verify", "--export", export, "--checkpoint", checkpoint, "--keys", keysURL)
	require.Equal(t, 0, code, "aether verify: %s%s", stdout, stderr)
	require.Contains(t, stdout, "12")

	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: make test-deps installs it")
	}
	script, err := filepath.Abs("../../examples/verify-node/verify.mjs")
	require.NoError(t, err)
	nodeRun := func(file string) (string, int) {
		cmd := exec.Command(node, script, "--export", file, "--checkpoint", checkpoint, "--keys", keysFile)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}
	out, code := nodeRun(export)
	require.Equal(t, 0, code, "node verifier: %s", out)

	// One field of line 7 edited: both name line 7.
	zr, err := os.Open(export)
	require.NoError(t, err)
	gz, err := gzip.NewReader(zr)
	require.NoError(t, err)
	plain, err := io.ReadAll(gz)
	zr.Close()
	require.NoError(t, err)
	lines := strings.SplitAfter(string(plain), "\n")
	require.Contains(t, lines[6], `"id":"d-6"`)
	lines[6] = strings.Replace(lines[6], `"id":"d-6"`, `"id":"d-X"`, 1)
	tampered := filepath.Join(dir, "tampered.ndjson")
	require.NoError(t, os.WriteFile(tampered, []byte(strings.Join(lines, "")), 0o600))
	stdout, _, code = run(t, nil, "verify", "--export", tampered, "--checkpoint", checkpoint, "--keys", keysFile)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "line 7: sequence 7:")
	out, code = nodeRun(tampered)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "line 7: sequence 7:")

	// The database superuser changes one field of event 5 behind the
	// triggers' back: a fresh export of the same range, checked against
	// the checkpoint signed before, names sequence 5 in both verifiers.
	pool := mustPool(t, s.db)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "ALTER TABLE audit_events DISABLE TRIGGER USER")
	require.NoError(t, err)
	tag, err := tx.Exec(ctx, "UPDATE audit_events SET resource_id = 'd-forged' WHERE project_id = 'plant-1' AND sequence = 5")
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	_, err = tx.Exec(ctx, "ALTER TABLE audit_events ENABLE TRIGGER USER")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	fresh, freshCheckpoint := exportAndDownload(t, s, tok, dir, "fresh.ndjson.gz")
	require.Equal(t, checkpointJWS, freshCheckpoint, "the checkpoint at 12 is reused, not re-signed over the changed chain")
	stdout, _, code = run(t, nil, "verify", "--export", fresh, "--checkpoint", checkpoint, "--keys", keysFile)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "line 5: sequence 5:")
	out, code = nodeRun(fresh)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "line 5: sequence 5:")
}

// exportAndDownload requests an AUDIT export of plant-1's sequences 1..12,
// waits until it is READY, downloads it with `aether export download`
// into dir/name and returns the file and the export's checkpoint JWS.
func exportAndDownload(t *testing.T, s served, tok, dir, name string) (string, string) {
	t.Helper()
	data, errs := postGraphQL(t, s.base, tok, `mutation($in: RequestDataExportInput!) { requestDataExport(input: $in) { export { id } } }`,
		map[string]any{"in": map[string]any{"projectId": "plant-1", "kind": "AUDIT", "fromSequence": "1", "toSequence": "12",
			"format": "NDJSON", "compression": "GZIP", "confirm": true}})
	require.Empty(t, errs)
	var requested struct {
		RequestDataExport struct{ Export struct{ ID string } }
	}
	require.NoError(t, json.Unmarshal(data, &requested))
	id := requested.RequestDataExport.Export.ID

	var ready struct {
		DataExport struct {
			State      string
			Checkpoint *struct {
				Sequence string
				JWS      string `json:"jws"`
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, errs = postGraphQL(t, s.base, tok, `query($id: ID!) { dataExport(id: $id) { state checkpoint { sequence jws } } }`, map[string]any{"id": id})
		require.Empty(t, errs)
		require.NoError(t, json.Unmarshal(data, &ready))
		if ready.DataExport.State == "READY" {
			break
		}
		require.NotEqual(t, "FAILED", ready.DataExport.State)
		require.True(t, time.Now().Before(deadline), "export not ready: %s", data)
		time.Sleep(100 * time.Millisecond)
	}
	require.NotNil(t, ready.DataExport.Checkpoint)
	require.Equal(t, "12", ready.DataExport.Checkpoint.Sequence)
	export := filepath.Join(dir, name)
	_, stderr, code := run(t, []string{"AETHER_URL=" + s.base, "AETHER_TOKEN=" + tok}, "export", "download", id, "-o", export, "--no-progress")
	require.Equal(t, 0, code, stderr)
	return export, ready.DataExport.Checkpoint.JWS
}
