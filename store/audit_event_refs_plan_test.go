package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/dbsqlc"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestFanoutRefsGenericPlanSortsNothing: the fan-out's read of its events
// (dbsqlc.AuditEventRefs) has a generic plan that prunes the partitions of
// audit_events when it starts and reads the one left through its primary
// key, with no Sort. Its ORDER BY made the generic plan sort the Append of
// every partition, so the plan cache kept planning it anew at every call
// (custom plans; docs/benchmarks.md, "Fan-out's database side").
func TestFanoutRefsGenericPlanSortsNothing(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	_, err := pool.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash,
			chain_version, recorded_by_subject)
		SELECT 't1', 'p1', g, gen_random_uuid(), 'doc.k', $1::timestamptz + g * interval '1 ms',
			$1::timestamptz + g * interval '1 ms', 'USER', 'u', 'doc', 'd', 'SUCCESS', '{}', '\x00', '\x00', 2, 'seed'
		FROM generate_series(1, 2000) g`, month.Add(time.Hour))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE audit_events")
	require.NoError(t, err)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "PREPARE refs AS "+dbsqlc.AuditEventRefs)
	require.NoError(t, err)
	var plan string
	require.NoError(t, conn.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (FORMAT JSON) EXECUTE refs('t1', 'p1', 100, 599, '%s', '%s')`,
		month.Format(time.RFC3339), month.AddDate(0, 1, 0).Format(time.RFC3339))).Scan(&plan))
	require.NotContains(t, plan, `"Node Type": "Sort"`, "the generic plan sorts:\n%s", plan)
	require.Contains(t, plan, `"Subplans Removed"`, "the generic plan does not prune partitions when it starts:\n%s", plan)
	require.Equal(t, 1, strings.Count(plan, `"Index Name": "audit_events_p`+month.Format("200601")+`_pkey"`),
		"the generic plan does not read this month's partition by its primary key:\n%s", plan)
}
