package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EvidenceTables are the append-only tables of evidence. The runtime role
// may only INSERT into them and SELECT from them: GrantAppRole grants
// nothing else on them, and CheckStoragePrivilege reports a login that owns
// one or may change or delete its rows. A new evidence table is added here
// by name; a name whose table does not exist (yet) is skipped.
var EvidenceTables = []string{"audit_events", "audit_checkpoints"}

// ChainHeadsTable holds the head of each project's chain. The runtime role
// inserts heads and advances them on append (ChainHeadAppendColumns), but
// may not move the purged prefix (purged_through, purged_hash): only
// PurgeFunction does.
const ChainHeadsTable = "audit_project_heads"

// ChainHeadAppendColumns are the columns of ChainHeadsTable an append
// updates, the only ones the runtime role may UPDATE.
var ChainHeadAppendColumns = []string{"last_sequence", "last_hash", "last_recorded_at"}

// PurgeFunction is the SECURITY DEFINER function (migration 00012), owned
// by the role that migrates, through which the retention purge deletes a
// prefix of a project's events. The runtime role may EXECUTE it.
const PurgeFunction = "aether_purge_audit_events(text, text, timestamptz, bigint)"

// ExpectHeadFunction is the function of migration 00019 that locks a
// chain head the caller expects (Tx.ExpectAuditHead). It runs with the
// caller's rights; the runtime role may EXECUTE it.
const ExpectHeadFunction = "aether_expect_audit_head(text, text, bigint, bytea, boolean)"

// CreateAuditPartitionsFunction is the SECURITY DEFINER function
// (migration 00022), owned by the role that migrates, that creates the
// monthly partitions of audit_events ahead (Store.CreateAuditPartitions):
// the runtime role may EXECUTE it, never create tables itself.
const CreateAuditPartitionsFunction = "aether_create_audit_partitions(timestamptz)"

// PurgeAuditPartitionFunction and DropAuditPartitionFunction are the
// SECURITY DEFINER functions (migration 00022) of the retention purge by
// partition (Tx.PurgeAuditPartition, Store.DropAuditPartition): the
// runtime role may EXECUTE them.
const (
	PurgeAuditPartitionFunction = "aether_purge_audit_partition(timestamptz, timestamptz, timestamptz)"
	DropAuditPartitionFunction  = "aether_drop_audit_partition(text, interval)"
)

// migrationTables record which migrations ran: the runtime role reads them
// (readiness, River) but never writes them.
var migrationTables = []string{"goose_db_version", "river_migration"}

// DefaultAppRole is the runtime role of the embedded database.
const DefaultAppRole = "aether_app"

// AppRole is the runtime role the service serves as: a login that may
// append evidence and read it but not change or delete it.
type AppRole struct {
	// Name is the role's name.
	Name string
	// Password, when not empty, is set as the role's password (on creation
	// and on every GrantAppRole). When empty a new role gets none (fine for
	// trust or peer authentication) and an existing one keeps its own.
	Password string
}

// GrantAppRole creates the runtime role unless it exists (as a LOGIN role
// without superuser, CREATEDB, CREATEROLE, replication or BYPASSRLS) and
// applies its privileges in the current schema, replacing what it had:
//
//   - EvidenceTables: SELECT and INSERT;
//   - ChainHeadsTable: SELECT, INSERT and UPDATE of ChainHeadAppendColumns;
//   - the migration records (goose_db_version, river_migration) and the
//     partition registry (PartitionTables): SELECT;
//   - every other table (webhooks, exports, idempotency keys, River's):
//     SELECT, INSERT, UPDATE and DELETE;
//   - every sequence: USAGE and SELECT; PurgeFunction, ExpectHeadFunction,
//     the audit partition functions (CreateAuditPartitionsFunction,
//     PurgeAuditPartitionFunction, DropAuditPartitionFunction) and the
//     other tables' (CreatePartitionFunction, DropPartitionsFunction) and
//     CreatePastPartitionsFunction: EXECUTE;
//   - partitions: nothing granted here (they are read and written through
//     their partitioned table);
//   - CONNECT on the database and USAGE on the schema;
//   - default privileges, for tables that the connected login (the owner)
//     creates later, by our or River's migrations: SELECT and INSERT only
//     (and USAGE, SELECT on new sequences), so a new table is append-only
//     for the runtime role until GrantAppRole runs again and gives it what
//     its kind needs.
//
// conn must be connected as the owner of the tables (the login that
// migrates), which needs CREATEROLE unless the role exists already. It is
// idempotent. Migrate with an AppRole calls it under the migration lock.
func GrantAppRole(ctx context.Context, conn *pgx.Conn, role AppRole) error {
	if role.Name == "" {
		return errors.New("app role: a name is required")
	}
	if err := ensureAppRole(ctx, conn, role); err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("app role: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit a no-op
	var schema, database string
	if err := tx.QueryRow(ctx, "SELECT current_schema(), current_database()").Scan(&schema, &database); err != nil {
		return fmt.Errorf("app role: %w", err)
	}
	r := pgx.Identifier{role.Name}.Sanitize()
	s := pgx.Identifier{schema}.Sanitize()
	stmts := []string{
		"GRANT CONNECT ON DATABASE " + pgx.Identifier{database}.Sanitize() + " TO " + r,
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " REVOKE ALL ON TABLES FROM " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " GRANT SELECT, INSERT ON TABLES TO " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " REVOKE ALL ON SEQUENCES FROM " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " GRANT USAGE, SELECT ON SEQUENCES TO " + r,
	}
	tables, err := schemaRelations(ctx, tx, schema, "'r', 'p'")
	if err != nil {
		return err
	}
	for _, t := range tables {
		name := s + "." + pgx.Identifier{t}.Sanitize()
		// Revoking table privileges also revokes them on every column.
		stmts = append(stmts, "REVOKE ALL ON TABLE "+name+" FROM "+r)
		switch {
		case contains(EvidenceTables, t):
			stmts = append(stmts, "GRANT SELECT, INSERT ON TABLE "+name+" TO "+r)
		case t == ChainHeadsTable:
			cols := make([]string, len(ChainHeadAppendColumns))
			for i, c := range ChainHeadAppendColumns {
				cols[i] = pgx.Identifier{c}.Sanitize()
			}
			stmts = append(stmts, "GRANT SELECT, INSERT ON TABLE "+name+" TO "+r,
				"GRANT UPDATE ("+strings.Join(cols, ", ")+") ON TABLE "+name+" TO "+r)
		case contains(migrationTables, t) || contains(PartitionTables, t):
			stmts = append(stmts, "GRANT SELECT ON TABLE "+name+" TO "+r)
		default:
			stmts = append(stmts, "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "+name+" TO "+r)
		}
	}
	sequences, err := schemaRelations(ctx, tx, schema, "'S'")
	if err != nil {
		return err
	}
	for _, q := range sequences {
		name := s + "." + pgx.Identifier{q}.Sanitize()
		stmts = append(stmts, "REVOKE ALL ON SEQUENCE "+name+" FROM "+r, "GRANT USAGE, SELECT ON SEQUENCE "+name+" TO "+r)
	}
	for _, fn := range []string{PurgeFunction, ExpectHeadFunction, CreateAuditPartitionsFunction,
		PurgeAuditPartitionFunction, DropAuditPartitionFunction, CreatePartitionFunction, DropPartitionsFunction,
		CreatePastPartitionsFunction} {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", s+"."+fn).Scan(&exists); err != nil {
			return fmt.Errorf("app role: %w", err)
		}
		if exists {
			stmts = append(stmts, "GRANT EXECUTE ON FUNCTION "+s+"."+fn+" TO "+r)
		}
	}
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("app role: %s: %w", stmt, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("app role: %w", err)
	}
	return nil
}

// ensureAppRole creates the role unless it exists, sets its password when
// one is given, and refuses a role that could change history anyway.
func ensureAppRole(ctx context.Context, conn *pgx.Conn, role AppRole) error {
	var me string
	var exists, login, super, bypass, member bool
	err := conn.QueryRow(ctx, `SELECT current_user, r.rolname IS NOT NULL, COALESCE(r.rolcanlogin, false),
		COALESCE(r.rolsuper, false), COALESCE(r.rolbypassrls, false),
		COALESCE(pg_has_role(r.oid, current_user, 'MEMBER'), false)
		FROM (SELECT 1) one LEFT JOIN pg_roles r ON r.rolname = $1`, role.Name).
		Scan(&me, &exists, &login, &super, &bypass, &member)
	if err != nil {
		return fmt.Errorf("app role: reading role %q: %w", role.Name, err)
	}
	switch {
	case role.Name == me:
		return fmt.Errorf("app role: %q is the login that migrates (the owner): the runtime role must be another role", role.Name)
	case super || bypass:
		return fmt.Errorf("app role: %q is a superuser or bypasses row security: it could change history; use another role", role.Name)
	case member:
		return fmt.Errorf("app role: %q is a member of the owner %q, so it has its rights: use a role outside it", role.Name, me)
	}
	// Role statements take no parameters: format() quotes the name and
	// the password on the server.
	var stmt string
	switch {
	case !exists && role.Password != "":
		stmt = "CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD %L"
	case !exists:
		stmt = "CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
	case role.Password != "":
		stmt = "ALTER ROLE %I LOGIN PASSWORD %L"
	case !login:
		stmt = "ALTER ROLE %I LOGIN"
	default:
		return nil
	}
	var sql string
	if err := conn.QueryRow(ctx, "SELECT format($1::text, $2::text, $3::text)", stmt, role.Name, role.Password).Scan(&sql); err != nil {
		return fmt.Errorf("app role: %w", err)
	}
	_, err = conn.Exec(ctx, sql)
	var pgErr *pgconn.PgError
	if !exists && errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505") {
		// Another process (migrating another database of the server)
		// created it first: set the password, if any, on it.
		if role.Password == "" {
			return nil
		}
		return ensureAppRole(ctx, conn, role)
	}
	if err != nil {
		// Never the statement: it may hold the password.
		return fmt.Errorf("app role: creating or altering role %q: %w", role.Name, err)
	}
	return nil
}

// schemaRelations lists the relations of the schema whose relkind is one
// of kinds (an SQL list of 'r', 'p', 'S'), in name order.
func schemaRelations(ctx context.Context, tx pgx.Tx, schema, kinds string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN (`+kinds+`) AND NOT c.relispartition ORDER BY c.relname`, schema)
	if err != nil {
		return nil, fmt.Errorf("app role: listing tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("app role: listing tables: %w", err)
	}
	return names, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// StoragePrivilege is what the connected login could do to history beyond
// appending to it.
type StoragePrivilege struct {
	// Login is the connected role (current_user).
	Login string
	// Superuser: the login is a superuser, which may do anything.
	Superuser bool
	// BypassRLS: the login bypasses row-level security.
	BypassRLS bool
	// OwnsEvidence: the login owns, or is a member of the owner of, an
	// evidence table or the chain heads, so it may disable their triggers,
	// alter or drop them.
	OwnsEvidence bool
	// CanChange: the login may UPDATE, DELETE or TRUNCATE an evidence
	// table, or move the heads' purged prefix, by privileges it was granted.
	CanChange bool
}

// Privileged reports whether the login can change history rather than
// only append to it.
func (p StoragePrivilege) Privileged() bool {
	return p.Superuser || p.BypassRLS || p.OwnsEvidence || p.CanChange
}

// Reasons lists why the login is privileged, for a log line.
func (p StoragePrivilege) Reasons() []string {
	var out []string
	if p.Superuser {
		out = append(out, "superuser")
	}
	if p.BypassRLS {
		out = append(out, "bypasses row-level security")
	}
	if p.OwnsEvidence {
		out = append(out, "owns the evidence tables")
	}
	if p.CanChange {
		out = append(out, "may update, delete or truncate evidence")
	}
	return out
}

// CheckStoragePrivilege reports what the login of q (a pool or a
// connection) could do to EvidenceTables and ChainHeadsTable beyond
// appending. Tables that do not exist are skipped.
func CheckStoragePrivilege(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (StoragePrivilege, error) {
	var p StoragePrivilege
	err := q.QueryRow(ctx, `WITH ev AS (
			SELECT c.oid, c.relowner FROM unnest($1::text[]) t(name) JOIN pg_class c ON c.oid = to_regclass(t.name)),
		heads AS (SELECT c.oid, c.relowner FROM pg_class c WHERE c.oid = to_regclass($2))
		SELECT current_user, r.rolsuper, r.rolbypassrls,
			EXISTS (SELECT 1 FROM (SELECT relowner FROM ev UNION ALL SELECT relowner FROM heads) o
				WHERE pg_has_role(o.relowner, 'MEMBER')),
			EXISTS (SELECT 1 FROM ev WHERE has_table_privilege(ev.oid, 'UPDATE, DELETE, TRUNCATE'))
			OR EXISTS (SELECT 1 FROM heads WHERE has_table_privilege(heads.oid, 'DELETE, TRUNCATE')
				OR has_column_privilege(heads.oid, 'purged_through', 'UPDATE')
				OR has_column_privilege(heads.oid, 'purged_hash', 'UPDATE'))
		FROM pg_roles r WHERE r.rolname = current_user`, EvidenceTables, ChainHeadsTable).
		Scan(&p.Login, &p.Superuser, &p.BypassRLS, &p.OwnsEvidence, &p.CanChange)
	if err != nil {
		return p, fmt.Errorf("checking storage privileges: %w", err)
	}
	return p, nil
}
