package store_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// seedChain appends n events to t1/p1 as the owner, through the store's
// own append path, so the runtime role has history to attack.
func seedChain(t *testing.T, ownerURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id, last_sequence, last_hash) VALUES ('t1', 'p1', 2, '\x01')`)
	require.NoError(t, err)
	for seq := 1; seq <= 2; seq++ {
		_, err = conn.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash)
			VALUES ('t1', 'p1', $1, gen_random_uuid(), 'device.updated', now(), now(), 'USER', 'u', 'device', 'd', 'SUCCESS', '{}', '\x00', '\x01')`, seq)
		require.NoError(t, err)
	}
}

func requireCode(t *testing.T, err error, code, stmt string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.Truef(t, errors.As(err, &pgErr), "%s: want SQLSTATE %s, got %v", stmt, code, err)
	require.Equalf(t, code, pgErr.Code, "%s: %v", stmt, err)
}

// TestRuntimeRoleCannotChangeHistory connects as the runtime role that
// GrantAppRole sets up: every way of changing or removing evidence fails
// with insufficient_privilege, while appending and reading still work.
func TestRuntimeRoleCannotChangeHistory(t *testing.T) {
	ownerURL, appURL, _ := storetest.NewAppRoleDatabase(t)
	seedChain(t, ownerURL)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	defer conn.Close(ctx)

	for _, stmt := range []string{
		"UPDATE audit_events SET action = 'forged' WHERE sequence = 1",
		"DELETE FROM audit_events WHERE sequence = 1",
		"TRUNCATE audit_events",
		"ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update",
		"ALTER TABLE audit_events DISABLE TRIGGER ALL",
		"DROP TABLE audit_events",
		"CREATE TRIGGER evil BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_reject_change()",
		"UPDATE audit_project_heads SET purged_through = 1",
		"UPDATE audit_project_heads SET purged_hash = '\\x02'",
		"DELETE FROM audit_project_heads",
		"TRUNCATE audit_project_heads",
		"ALTER TABLE audit_project_heads DISABLE TRIGGER ALL",
		"DROP TABLE audit_project_heads",
		"DROP FUNCTION aether_purge_audit_events(text, text, timestamptz, bigint)",
		"INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)",
		"UPDATE audit_checkpoints SET jws = 'forged'",
		"DELETE FROM audit_checkpoints",
		"TRUNCATE audit_checkpoints",
		"ALTER TABLE audit_checkpoints DISABLE TRIGGER ALL",
		"DROP TABLE audit_checkpoints",
	} {
		_, err := conn.Exec(ctx, stmt)
		requireCode(t, err, "42501", stmt)
	}
	// Nor through the partition that holds the events (migration 00022),
	// and the drop function refuses a partition with events not purged.
	var part string
	require.NoError(t, conn.QueryRow(ctx, "SELECT tableoid::regclass::text FROM audit_events WHERE sequence = 1").Scan(&part))
	for _, stmt := range []string{
		"UPDATE " + part + " SET action = 'forged' WHERE sequence = 1",
		"DELETE FROM " + part + " WHERE sequence = 1",
		"TRUNCATE " + part,
		"ALTER TABLE " + part + " DISABLE TRIGGER ALL",
		"ALTER TABLE audit_events DETACH PARTITION " + part,
		"DROP TABLE " + part,
		"CREATE TABLE audit_events_p999901 PARTITION OF audit_events FOR VALUES FROM ('9999-01-01') TO ('9999-02-01')",
		"UPDATE audit_project_heads SET last_recorded_at = now(), purged_through = 2",
	} {
		_, err := conn.Exec(ctx, stmt)
		requireCode(t, err, "42501", stmt)
	}
	var dropped bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT aether_drop_audit_partition($1, '1 s')", part).Scan(&dropped))
	require.False(t, dropped, "a partition with events past their purged prefix stays")

	// What an append does still works: a new head, the head advanced
	// (with the row lock the append takes), an event inserted.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO audit_project_heads (tenant_id, project_id) VALUES ('t1', 'p2') ON CONFLICT DO NOTHING")
	require.NoError(t, err)
	var last int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT last_sequence FROM audit_project_heads WHERE tenant_id = 't1' AND project_id = 'p1' FOR UPDATE").Scan(&last))
	require.Equal(t, int64(2), last)
	_, err = tx.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
		subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash)
		VALUES ('t1', 'p1', 3, gen_random_uuid(), 'device.updated', now(), now(), 'USER', 'u', 'device', 'd', 'SUCCESS', '{}', '\x00', '\x03')`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE audit_project_heads SET last_sequence = 3, last_hash = '\x03' WHERE tenant_id = 't1' AND project_id = 'p1'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	// Purge only through the function: here it finds nothing old enough.
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM aether_purge_audit_events('t1', 'p1', now() - interval '1 day', 10)").Scan(&n))
	require.Equal(t, 0, n)
	// Readiness reads the migration records.
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	defer pool.Close()
	current, err := store.MigrationsCurrent(ctx, pool)
	require.NoError(t, err)
	require.True(t, current)
	// Migrating an up-to-date database as the runtime role is a no-op that
	// works (serve migrates on start).
	require.NoError(t, store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))))
}

// TestPurgeFunctionNotPublic: only the runtime role may call the purge
// function (and the expected head's lock), not any login of the server.
func TestPurgeFunctionNotPublic(t *testing.T) {
	ownerURL, _, _ := storetest.NewAppRoleDatabase(t)
	_, otherURL, _ := storetest.NewAppRoleDatabase(t) // a role granted on another database only
	ctx := context.Background()
	other, err := pgx.ParseConfig(otherURL)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, storetest.URLAs(t, ownerURL, other.User))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT * FROM aether_purge_audit_events('t1', 'p1', now(), 10)")
	requireCode(t, err, "42501", "calling the purge function")
	_, err = conn.Exec(ctx, "SELECT aether_expect_audit_head('t1', 'p1', 0, '\\x00'::bytea, false)")
	requireCode(t, err, "42501", "calling the expected head's lock")
}

// TestGrantAppRoleIdempotent applies the grants twice, with a password the
// second time, and checks what tables created later get: append-only until
// the grants run again, and an evidence table that did not exist when it
// was listed is skipped, then granted as evidence.
func TestGrantAppRoleIdempotent(t *testing.T) {
	ownerURL, appURL, role := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	owner, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer owner.Close(ctx)

	evidence := store.EvidenceTables
	store.EvidenceTables = append(append([]string(nil), evidence...), "audit_test_checkpoints")
	t.Cleanup(func() { store.EvidenceTables = evidence })
	require.NoError(t, store.GrantAppRole(ctx, owner, store.AppRole{Name: role}))
	require.NoError(t, store.GrantAppRole(ctx, owner, store.AppRole{Name: role, Password: "s3cret 'quoted'"}))

	_, err = owner.Exec(ctx, "CREATE TABLE audit_test_checkpoints (id bigint PRIMARY KEY)")
	require.NoError(t, err)
	_, err = owner.Exec(ctx, "CREATE TABLE later_table (id bigserial PRIMARY KEY)")
	require.NoError(t, err)

	app, err := pgx.Connect(ctx, appURL) // trust: the password is not asked
	require.NoError(t, err)
	defer app.Close(ctx)
	// Default privileges: new tables are append-only until granted again.
	for _, table := range []string{"audit_test_checkpoints", "later_table"} {
		_, err = app.Exec(ctx, "INSERT INTO "+table+" DEFAULT VALUES")
		if table == "audit_test_checkpoints" {
			requireCode(t, err, "23502", "insert without id") // allowed, but the id is missing
			_, err = app.Exec(ctx, "INSERT INTO audit_test_checkpoints VALUES (1)")
		}
		require.NoError(t, err)
		_, err = app.Exec(ctx, "DELETE FROM "+table)
		requireCode(t, err, "42501", "DELETE FROM "+table)
	}
	require.NoError(t, store.GrantAppRole(ctx, owner, store.AppRole{Name: role}))
	_, err = app.Exec(ctx, "DELETE FROM later_table")
	require.NoError(t, err)
	for _, stmt := range []string{"DELETE FROM audit_test_checkpoints", "UPDATE audit_test_checkpoints SET id = 2", "TRUNCATE audit_test_checkpoints"} {
		_, err = app.Exec(ctx, stmt)
		requireCode(t, err, "42501", stmt)
	}

	// The role must not be the owner, nor a superuser.
	require.ErrorContains(t, store.GrantAppRole(ctx, owner, store.AppRole{Name: "postgres"}), "owner")
}

// TestCheckStoragePrivilege: the superuser that owns the tables is
// privileged; the runtime role is not.
func TestCheckStoragePrivilege(t *testing.T) {
	ownerURL, appURL, role := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	for _, c := range []struct {
		url        string
		privileged bool
	}{{ownerURL, true}, {appURL, false}} {
		conn, err := pgx.Connect(ctx, c.url)
		require.NoError(t, err)
		p, err := store.CheckStoragePrivilege(ctx, conn)
		require.NoError(t, err)
		require.Equal(t, c.privileged, p.Privileged(), "%+v", p)
		if c.privileged {
			require.True(t, p.Superuser && p.OwnsEvidence, "%+v", p)
		} else {
			require.Equal(t, role, p.Login)
			require.Empty(t, p.Reasons())
		}
		require.NoError(t, conn.Close(ctx))
	}

	// A role that was granted DELETE on the events is privileged too.
	owner, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer owner.Close(ctx)
	_, err = owner.Exec(ctx, "GRANT DELETE ON audit_events TO "+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := store.CheckStoragePrivilege(ctx2, conn)
	require.NoError(t, err)
	require.True(t, p.CanChange && p.Privileged(), "%+v", p)
}
