package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// PartitionTables lists the registry of partitioned tables
// (aether_partitioned_tables, migration 00024) and the partitions it
// created (aether_partitions): the runtime role may only read them.
var PartitionTables = []string{"aether_partitioned_tables", "aether_partitions"}

// Partition maintenance functions (migration 00024): SECURITY DEFINER, owned
// by the role that migrates, the only way the runtime role creates or
// drops a partition. The runtime role may EXECUTE them.
const (
	CreatePartitionFunction = "aether_create_partition(text, timestamptz)"
	DropPartitionsFunction  = "aether_drop_partitions(text, timestamptz)"
)

// CreatePastPartitionsFunction is the SECURITY DEFINER function (migration
// 00033) through which the maintenance jobs create the past months whose
// rows sit in a DEFAULT partition (CreatePastPartitions). The runtime role
// may EXECUTE it.
const CreatePastPartitionsFunction = "aether_create_past_partitions(regclass, timestamptz, timestamptz)"

// PartitionedTables returns the tables registered for monthly partitions,
// by name.
func (q *queries) PartitionedTables(ctx context.Context) ([]domain.PartitionedTable, error) {
	rows, _ := q.db.Query(ctx, `SELECT table_name, bound_kind FROM aether_partitioned_tables ORDER BY table_name`)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[domain.PartitionedTable])
	if err != nil {
		return nil, fmt.Errorf("listing partitioned tables: %w", err)
	}
	return out, nil
}

// Partitions returns the partitions of table, oldest first.
func (q *queries) Partitions(ctx context.Context, table string) ([]domain.Partition, error) {
	rows, _ := q.db.Query(ctx, `SELECT table_name, partition_name, range_from, range_to FROM aether_partitions
		WHERE table_name = $1 ORDER BY range_to`, table)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Partition, error) {
		var p domain.Partition
		var from pgtype.Timestamptz
		err := row.Scan(&p.Table, &p.Name, &from, &p.To)
		p.From, p.To = finiteTime(from), p.To.UTC()
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing partitions of %s: %w", table, err)
	}
	return out, nil
}

// CreatePartition creates the partition of table for the month (UTC) of
// month, unless one covers it already; it returns the new partition's name,
// or "" when there was nothing to create.
func (q *queries) CreatePartition(ctx context.Context, table string, month time.Time) (string, error) {
	var name *string
	if err := q.db.QueryRow(ctx, "SELECT aether_create_partition($1, $2)", table, month).Scan(&name); err != nil {
		return "", fmt.Errorf("creating the partition of %s for %s: %w", table, month.UTC().Format("2006-01"), err)
	}
	if name == nil {
		return "", nil
	}
	return *name, nil
}

// CreatePastPartitions creates the partition of every month from since's
// up to before's (excluded) whose rows sit in the DEFAULT partition of
// table (audit_events or a registered table), moving those rows into it,
// and returns the names of the partitions it created.
func (q *queries) CreatePastPartitions(ctx context.Context, table string, since, before time.Time) ([]string, error) {
	names, err := q.sqlc.CreatePastPartitions(ctx, dbsqlc.CreatePastPartitionsParams{TableName: table, Since: since, Before: monthStart(before)})
	if err != nil {
		return nil, fmt.Errorf("creating the past partitions of %s: %w", table, err)
	}
	return names, nil
}

// DropPartitions drops the partitions of table that end at or before
// before, and deletes the rows before it that its default partition caught,
// in the transaction; it returns what each held, per project.
func (t *Tx) DropPartitions(ctx context.Context, table string, before time.Time) ([]domain.PartitionDrop, error) {
	rows, _ := t.tx.Query(ctx, `SELECT partition_name, range_from, range_to, COALESCE(tenant_id, ''), COALESCE(project_id, ''), row_count
		FROM aether_drop_partitions($1, $2)`, table, before)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.PartitionDrop, error) {
		d := domain.PartitionDrop{Partition: domain.Partition{Table: table}}
		var from pgtype.Timestamptz
		err := row.Scan(&d.Name, &from, &d.To, &d.TenantID, &d.ProjectID, &d.Rows)
		d.From, d.To = finiteTime(from), d.To.UTC()
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("dropping partitions of %s before %s: %w", table, before.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}

// finiteTime is t in UTC, or the zero time for -infinity (a legacy
// partition's lower bound).
func finiteTime(t pgtype.Timestamptz) time.Time {
	if t.InfinityModifier != pgtype.Finite || !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
