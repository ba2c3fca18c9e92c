package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTwoProcessesOneKilled runs two `aether serve` processes on one
// database and kills one with SIGKILL while it has webhook deliveries and an
// export in flight. The survivor's live subscribers keep receiving the
// events recorded through it, and after the rescue delay it completes the
// killed process's deliveries (recording the interrupted attempts as
// unknown) and its export.
func TestTwoProcessesOneKilled(t *testing.T) {
	t.Parallel()
	d := newDeployment(t, shared)
	d.seed(t, exportSeedEvents)
	rcv := newReceiver(t, 200*time.Millisecond, 500*time.Millisecond)

	// The first process is alone when the work starts, so it takes it.
	doomed := d.serve(t, "doomed")
	webhookSetup(t, doomed, d.token, rcv.url, 1)
	exportID := requestExport(t, doomed, d.token)
	for range 2 {
		require.NoError(t, recordEvents(context.Background(), doomed, d.token, 50))
	}
	await(t, time.Minute, "the first process delivers and exports", func() bool {
		_, open, _ := rcv.stats()
		var state string
		require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT state FROM data_exports WHERE id = $1`, exportID).Scan(&state))
		return open > 0 && state == "RUNNING"
	})

	// Every River client that ran a job so far is the first process's.
	doomedClients := riverClients(t, d.pool)
	require.NotEmpty(t, doomedClients)
	survivor := d.serve(t, "survivor")
	var maxSeq uint64
	require.NoError(t, d.pool.QueryRow(context.Background(),
		`SELECT max(sequence) FROM audit_events WHERE tenant_id = $1 AND project_id = $2`, tenant, project).Scan(&maxSeq))
	sub := subscribe(t, survivor, d.token, maxSeq)

	doomed.kill(t)
	var exportState string
	require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT state FROM data_exports WHERE id = $1`, exportID).Scan(&exportState))
	// The survivor delivers too: only the attempts of the killed process's
	// jobs are left over.
	leftovers := deliveringAttemptsOf(t, d.pool, doomedClients)
	t.Logf("at the kill: export %s, %d attempts DELIVERING", exportState, len(leftovers))
	require.NotEmpty(t, leftovers, "the kill left no attempt in flight")
	require.Equal(t, "RUNNING", exportState, "the export finished before the kill: seed more events")

	// The survivor's live feed carries on with events recorded through it.
	for range 4 {
		require.NoError(t, recordEvents(context.Background(), survivor, d.token, 5))
	}
	var lastSeq uint64
	require.NoError(t, d.pool.QueryRow(context.Background(),
		`SELECT max(sequence) FROM audit_events WHERE tenant_id = $1 AND project_id = $2`, tenant, project).Scan(&lastSeq))
	await(t, 30*time.Second, "the survivor's subscriber receives the new events", func() bool { return sub.last() >= lastSeq })
	assertSeenExactly(t, sub, maxSeq+1, lastSeq)

	// And it completes the killed process's jobs.
	e := awaitExportSettled(t, survivor, d.token, exportID, 3*time.Minute)
	require.Equal(t, "READY", e.State, "the survivor should complete the export: %v", e.FailureReason)
	awaitDeliveriesSettled(t, d.pool, rcv, 120, leftovers, 4*time.Minute)
	require.True(t, survivor.running())
}
