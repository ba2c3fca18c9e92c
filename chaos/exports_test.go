package chaos

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exportState is what the tests read of an export.
type exportState struct {
	ID            string  `json:"id"`
	State         string  `json:"state"`
	ProgressRows  string  `json:"progressRows"`
	ObjectRef     *string `json:"objectRef"`
	ContentDigest *string `json:"contentDigest"`
	ByteLength    *string `json:"byteLength"`
	RowCount      *string `json:"rowCount"`
	FailureReason *string `json:"failureReason"`
}

const exportFields = `id state progressRows objectRef contentDigest byteLength rowCount failureReason`

// requestExport queues an NDJSON export of the last 30 days of audit events.
func requestExport(t *testing.T, s *server, token string) string {
	t.Helper()
	now := time.Now().UTC()
	var out struct {
		RequestDataExport struct{ Export exportState }
	}
	mustGraphQL(t, s, token, `mutation($in: RequestDataExportInput!) { requestDataExport(input: $in) { export { `+exportFields+` } } }`,
		map[string]any{"in": map[string]any{"projectId": project, "kind": "AUDIT", "format": "NDJSON", "compression": "NONE",
			"from": now.Add(-30 * 24 * time.Hour).Format(time.RFC3339), "to": now.Add(time.Hour).Format(time.RFC3339), "confirm": true}}, &out)
	return out.RequestDataExport.Export.ID
}

// getExport reads an export through s.
func getExport(t *testing.T, s *server, token, id string) exportState {
	t.Helper()
	var out struct{ DataExport *exportState }
	mustGraphQL(t, s, token, `query($id: ID!) { dataExport(id: $id) { `+exportFields+` } }`, map[string]any{"id": id}, &out)
	require.NotNil(t, out.DataExport, "export %s not found", id)
	return *out.DataExport
}

// checkReadyExport downloads a READY export through a download capability
// and fails unless its bytes match the export's digest, length and row
// count.
func checkReadyExport(t *testing.T, s *server, token string, e exportState) {
	t.Helper()
	require.Equal(t, "READY", e.State)
	require.NotNil(t, e.ContentDigest)
	require.NotNil(t, e.ByteLength)
	require.NotNil(t, e.RowCount)
	var out struct {
		CreateDataExportDownload struct{ URL string }
	}
	mustGraphQL(t, s, token, `mutation($in: CreateDataExportDownloadInput!) { createDataExportDownload(input: $in) { url } }`,
		map[string]any{"in": map[string]any{"exportId": e.ID}}, &out)
	// Without --public-url the link is relative to the server.
	resp, err := http.Get(s.base + out.CreateDataExportDownload.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "download of READY export %s", e.ID)
	h := sha256.New()
	lines := 0
	r := bufio.NewReader(io.TeeReader(resp.Body, h))
	var n int64
	for {
		line, err := r.ReadString('\n')
		n += int64(len(line))
		if strings.HasSuffix(line, "\n") {
			lines++
		}
		if err == io.EOF {
			require.Empty(t, line, "the object ends in a partial line")
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, *e.ContentDigest, "sha256:"+hex.EncodeToString(h.Sum(nil)), "digest of export %s", e.ID)
	require.Equal(t, *e.ByteLength, strconv.FormatInt(n, 10), "length of export %s", e.ID)
	require.Equal(t, *e.RowCount, strconv.Itoa(lines), "rows of export %s", e.ID)
}

// storedObjects lists the objects of export id in the file bucket at dir.
func storedObjects(t *testing.T, dir, id string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !de.IsDir() && strings.Contains(filepath.Base(path), id+"-") && !strings.HasSuffix(path, ".attrs") {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// awaitExportSettled polls the export until it is READY or FAILED, checking
// every READY it sees against its object, and returns the end state.
func awaitExportSettled(t *testing.T, s *server, token, id string, timeout time.Duration) exportState {
	t.Helper()
	var e exportState
	await(t, timeout, "the export ends READY or FAILED", func() bool {
		e = getExport(t, s, token, id)
		return e.State == "READY" || e.State == "FAILED"
	})
	if e.State == "READY" {
		checkReadyExport(t, s, token, e)
	} else {
		require.NotNil(t, e.FailureReason)
		require.NotEmpty(t, *e.FailureReason, "a FAILED export says why")
	}
	return e
}

// exportSeedEvents is how many events the export tests seed: enough for an
// export to run for a while even on a quiet machine (about 200,000 rows/s).
const exportSeedEvents = 400_000

// TestKillDuringExport kills `aether serve` with SIGKILL while an export
// runs, starts it again, and checks that the export ends READY with a
// complete object matching its digest (or FAILED with a reason), never READY
// without one, and that no object of the killed run is left behind.
func TestKillDuringExport(t *testing.T) {
	t.Parallel()
	d := newDeployment(t, shared)
	d.seed(t, exportSeedEvents)
	first := d.serve(t, "first")
	id := requestExport(t, first, d.token)
	// Progress is recorded every second: rows > 0 means the object is
	// being written.
	await(t, time.Minute, "the export writes its object", func() bool {
		var state string
		var rows int64
		require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT state, progress_rows FROM data_exports WHERE id = $1`, id).Scan(&state, &rows))
		require.NotEqual(t, "READY", state, "the export finished before the kill: seed more events")
		return state == "RUNNING" && rows > 0
	})
	first.kill(t)
	var state string
	var rows int64
	require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT state, progress_rows FROM data_exports WHERE id = $1`, id).Scan(&state, &rows))
	t.Logf("at the kill: %s, %d rows written", state, rows)
	require.Equal(t, "RUNNING", state)
	require.Positive(t, rows)

	second := d.serve(t, "second")
	e := awaitExportSettled(t, second, d.token, id, 3*time.Minute)
	require.Equal(t, "READY", e.State, "the rerun should complete the export: %v", e.FailureReason)
	require.Equal(t, []string{*e.ObjectRef}, storedObjects(t, d.blobDir, id), "only the READY object is stored")
}
