package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// DefaultWebhookDeliveryRetention is how long webhook deliveries and their
// attempts (dead letters included) are kept unless the service says
// otherwise: their monthly partitions are dropped once wholly older.
const DefaultWebhookDeliveryRetention = 90 * 24 * time.Hour

// DefaultHistoryRetention is how long alarm and telemetry history are kept
// unless the service says otherwise (as long as audit events by default).
const DefaultHistoryRetention = DefaultAuditRetention

// DefaultPartitionMonthsAhead is how many months after the current one
// the maintenance job keeps partitions ready.
const DefaultPartitionMonthsAhead = 2

// PartitionConfig configures the partitioned history tables.
type PartitionConfig struct {
	// WebhookDeliveryRetention is how long deliveries and attempts are
	// kept; default DefaultWebhookDeliveryRetention.
	WebhookDeliveryRetention time.Duration
	// HistoryRetention is how long alarm and telemetry history are kept;
	// default DefaultHistoryRetention.
	HistoryRetention time.Duration
	// MonthsAhead is how many months after the current one get their
	// partitions ahead; default DefaultPartitionMonthsAhead.
	MonthsAhead int
}

func (c PartitionConfig) withDefaults() PartitionConfig {
	if c.WebhookDeliveryRetention <= 0 {
		c.WebhookDeliveryRetention = DefaultWebhookDeliveryRetention
	}
	if c.HistoryRetention <= 0 {
		c.HistoryRetention = DefaultHistoryRetention
	}
	if c.MonthsAhead <= 0 {
		c.MonthsAhead = DefaultPartitionMonthsAhead
	}
	return c
}

// retentionOf is how long the rows of a partitioned table are kept, or 0
// for a table whose partitions this maintenance only creates (one whose
// retention another job owns, such as audit events').
func (c PartitionConfig) retentionOf(table string) time.Duration {
	switch table {
	case "webhook_deliveries", "webhook_delivery_attempts":
		return c.WebhookDeliveryRetention
	case "alarm_history", "telemetry_history":
		return c.HistoryRetention
	}
	return 0
}

// PartitionStore is what partition maintenance needs of the Store: the
// registry of partitioned tables, the creation of a month's partition
// (through the SECURITY DEFINER function of migration 00024) and of the
// past months whose rows sit in a DEFAULT partition (migration 00033).
type PartitionStore interface {
	PartitionedTables(ctx context.Context) ([]domain.PartitionedTable, error)
	CreatePartition(ctx context.Context, table string, month time.Time) (string, error)
	// CreatePastPartitions creates the partition of every month from
	// since's up to before's (excluded) whose rows sit in table's DEFAULT
	// partition, moving them into it, and returns the names of those it
	// created.
	CreatePastPartitions(ctx context.Context, table string, since, before time.Time) ([]string, error)
}

// pastPartitionsSince is how far back the maintenance looks for rows of a
// past month in the DEFAULT partition of a table it keeps no retention for.
var pastPartitionsSince = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// createPastPartitions creates the partitions of the months before now's
// whose rows sit in table's DEFAULT partition, back to since, and logs them.
func (a *App) createPastPartitions(ctx context.Context, table string, since, now time.Time) ([]string, error) {
	names, err := a.store.CreatePastPartitions(ctx, table, since, now)
	for _, name := range names {
		a.logger.Info("created past partition for rows of its month in the default partition", "table", table, "partition", name)
	}
	return names, err
}

// PartitionTx drops expired partitions in a transaction, with the audit
// events that report it.
type PartitionTx interface {
	DropPartitions(ctx context.Context, table string, before time.Time) ([]domain.PartitionDrop, error)
}

// PartitionMaintenance is what one MaintainPartitions run did.
type PartitionMaintenance struct {
	// Created are the partitions created ahead.
	Created []string
	// Dropped are the partitions dropped (and default partitions pruned),
	// per project.
	Dropped []domain.PartitionDrop
}

// MaintainPartitions runs the partition maintenance of the periodic job:
// for every registered table it creates the partitions of the past months
// whose rows sit in its DEFAULT partition (back to its retention, moving
// those rows into them), of the current month and of the MonthsAhead after
// it, and for a table with a retention it
// drops the partitions whose every row is older than the retention, each
// table's drops in one transaction with an operational event
// (retention.partitions.dropped, subject system:aether) in every project
// that had rows in them, saying which partitions went and how many of its
// rows each held. A failure on one table does not stop the others; the
// errors are joined.
func (a *App) MaintainPartitions(ctx context.Context) (_ PartitionMaintenance, err error) {
	ctx, span := a.startCommand(ctx, "MaintainPartitions")
	defer func() { a.endCommand(span, err) }()
	var out PartitionMaintenance
	tables, err := a.store.PartitionedTables(ctx)
	if err != nil {
		return out, err
	}
	now := a.storedNow()
	var errs []error
	for _, t := range tables {
		since := pastPartitionsSince
		if retention := a.partitions.retentionOf(t.Name); retention > 0 {
			since = now.Add(-retention)
		}
		past, err := a.createPastPartitions(ctx, t.Name, since, now)
		out.Created = append(out.Created, past...)
		if err != nil {
			errs = append(errs, err)
		}
		for m := range a.partitions.MonthsAhead + 1 {
			name, err := a.store.CreatePartition(ctx, t.Name, now.AddDate(0, m, 0))
			if err != nil {
				errs = append(errs, err)
				break
			}
			if name != "" {
				out.Created = append(out.Created, name)
				a.logger.Info("created partition", "table", t.Name, "partition", name)
			}
		}
		retention := a.partitions.retentionOf(t.Name)
		if retention <= 0 {
			continue
		}
		dropped, err := a.dropExpiredPartitions(ctx, t.Name, now.Add(-retention), now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.Dropped = append(out.Dropped, dropped...)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("partition maintenance: %w", errors.Join(errs...))
	}
	return out, nil
}

// dropExpiredPartitions drops the partitions of table wholly before
// cutoff and records, in the same transaction, one
// retention.partitions.dropped event per project that had rows in them.
func (a *App) dropExpiredPartitions(ctx context.Context, table string, cutoff, now time.Time) ([]domain.PartitionDrop, error) {
	var dropped []domain.PartitionDrop
	err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		if dropped, err = tx.DropPartitions(ctx, table, cutoff); err != nil || len(dropped) == 0 {
			return err
		}
		type project struct{ tenant, project string }
		byProject := map[project][]map[string]any{}
		var names []string
		seen := map[string]bool{}
		for _, d := range dropped {
			if !seen[d.Name] {
				seen[d.Name] = true
				names = append(names, d.Name)
			}
			if d.TenantID == "" {
				continue // a table without projects: logged below
			}
			k := project{d.TenantID, d.ProjectID}
			p := map[string]any{"partition": d.Name, "to": d.To.Format(time.RFC3339), "rows": d.Rows}
			if !d.From.IsZero() {
				p["from"] = d.From.Format(time.RFC3339)
			}
			byProject[k] = append(byProject[k], p)
		}
		keys := make([]project, 0, len(byProject))
		for k := range byProject {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].tenant < keys[j].tenant || keys[i].tenant == keys[j].tenant && keys[i].project < keys[j].project
		})
		for _, k := range keys {
			details, _ := json.Marshal(map[string]any{"table": table, "cutoff": cutoff.Format(time.RFC3339),
				"partitions": byProject[k]})
			if err := a.recordOperationalEvent(ctx, tx, k.tenant, k.project, "retention.partitions.dropped",
				domain.Resource{Type: "table", ID: table}, domain.RiskMedium, string(details), now); err != nil {
				return err
			}
		}
		a.logger.Info("dropped expired partitions", "table", table, "cutoff", cutoff, "partitions", names)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dropped, nil
}
