package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// TestEmptyProjectIDIsNoProject: an empty project id names no project, for
// every operation that takes one, even with a token for all projects: it
// never skips project scoping (alarm history was once written under "").
func TestEmptyProjectIDIsNoProject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	all := app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{
		app.PermissionAuditRead, app.PermissionHistoryWrite, app.PermissionWebhooksRead, app.PermissionExportsRead,
	}}
	_, err := b.app.AppendAlarmHistory(ctx, all, "", []domain.AlarmRecord{{OccurredAt: time.Now(), AlarmID: "a1", DeviceID: "d1",
		Severity: domain.AlarmMajor, State: domain.AlarmRaised, Message: "m"}})
	require.ErrorIs(t, err, app.ErrProjectNotFound)
	_, err = b.app.AppendTelemetryHistory(ctx, all, "", []domain.TelemetryPoint{{OccurredAt: time.Now(), DeviceID: "d1", Metric: "t", Value: 1}})
	require.ErrorIs(t, err, app.ErrProjectNotFound)
	_, err = b.app.SearchAuditEvents(ctx, all, app.SearchAuditEventsInput{})
	require.ErrorIs(t, err, app.ErrProjectNotFound)
	_, err = b.app.VerifyAuditChain(ctx, all, "", nil, nil)
	require.ErrorIs(t, err, app.ErrProjectNotFound)
	_, err = b.app.WebhookDestinations(ctx, all, "")
	require.ErrorIs(t, err, app.ErrProjectNotFound)
	require.Zero(t, countEvents(t, b.pool))
	var rows int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM alarm_history) + (SELECT count(*) FROM telemetry_history)`).Scan(&rows))
	require.Zero(t, rows, "nothing written under an empty project")
}
