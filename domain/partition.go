package domain

import "time"

// Partition bound kinds: how a month maps to a partition's key range
// (store.PartitionedTable.BoundKind).
const (
	// PartitionBoundTimestamp: the key is a time; a month's bounds are its
	// first instants.
	PartitionBoundTimestamp = "TIMESTAMPTZ"
	// PartitionBoundUUIDv7: the key is a UUIDv7; a month's bound is the
	// smallest UUIDv7 of its first millisecond.
	PartitionBoundUUIDv7 = "UUIDV7"
)

// PartitionedTable is a table registered for monthly partitions.
type PartitionedTable struct {
	// Name is the table's name.
	Name string
	// BoundKind says how a month maps to key bounds
	// (PartitionBoundTimestamp or PartitionBoundUUIDv7).
	BoundKind string
}

// Partition is one monthly partition of a partitioned history table.
type Partition struct {
	// Table is the partitioned table, Name the partition.
	Table, Name string
	// From and To bound the times the partition holds, [From, To); From is
	// the zero time for a legacy partition (an old table attached whole).
	From, To time.Time
}

// PartitionDrop is what a dropped partition held for one project, or for
// the whole partition (TenantID and ProjectID empty) when its table has no
// project columns.
type PartitionDrop struct {
	Partition
	TenantID, ProjectID string
	// Rows is how many rows of the project the partition held.
	Rows int64
}
