package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/seed"
	"github.com/aetheriot/aether-audit/store"
)

// seedCmd appends demo events through the RecordAuditEvents use case, and
// demo alarm and telemetry history through AppendAlarmHistory and
// AppendTelemetryHistory.
type seedCmd struct {
	databaseFlags
	Tenant       string `name:"tenant" required:"" help:"Tenant id."`
	Project      string `name:"project" required:"" help:"Project id."`
	Events       int    `name:"events" default:"1000" help:"Number of audit events to append (0 allowed with --alarms or --telemetry)."`
	Batch        int    `name:"batch" default:"500" help:"Audit events per transaction (1-1000)."`
	Alarms       int    `name:"alarms" default:"0" help:"Number of alarm history entries to append: raise, acknowledge and clear sequences of a few devices' alarms."`
	Telemetry    int    `name:"telemetry" default:"0" help:"Number of telemetry points to append: temperature, humidity and voltage of a few devices at regular intervals."`
	HistoryBatch int    `name:"history-batch" default:"5000" help:"Alarm entries or telemetry points per transaction (1-5000)."`
}

// emptyHistorySpan is the time span of the history seeded without audit
// events.
const emptyHistorySpan = 24 * time.Hour

// Run implements the seed command. The audit events start events×3s ago
// and come a few seconds apart; alarm and telemetry history cover the same
// span (the last day when there are no events).
func (c *seedCmd) Run(ctx context.Context) error {
	switch {
	case c.Events < 0 || c.Events == 0 && c.Alarms == 0 && c.Telemetry == 0:
		return fmt.Errorf("--events must be at least 1 (or 0 with --alarms or --telemetry)")
	case c.Alarms < 0:
		return fmt.Errorf("--alarms must not be negative")
	case c.Telemetry < 0:
		return fmt.Errorf("--telemetry must not be negative")
	case c.Batch < 1 || c.Batch > app.MaxRecordBatch:
		return fmt.Errorf("--batch must be between 1 and %d", app.MaxRecordBatch)
	case c.HistoryBatch < 1 || c.HistoryBatch > app.MaxHistoryBatch:
		return fmt.Errorf("--history-batch must be between 1 and %d", app.MaxHistoryBatch)
	}
	logger := c.logger()
	db, err := c.openMigrated(ctx, logger, true, "")
	if err != nil {
		return err
	}
	defer db.close(ctx)
	a := app.New(store.New(db.Pool), app.Config{Logger: logger})
	// A service identity holding only what it uses.
	id := app.Identity{Subject: "seed", TenantID: c.Tenant, ProjectIDs: []string{c.Project}}
	if c.Events > 0 {
		id.Permissions = append(id.Permissions, app.PermissionAuditWrite)
	}
	if c.Alarms > 0 || c.Telemetry > 0 {
		id.Permissions = append(id.Permissions, app.PermissionHistoryWrite)
	}

	now := time.Now()
	spanStart := now.Add(-emptyHistorySpan)
	if c.Events > 0 {
		spanStart = now.Add(-time.Duration(c.Events) * 3 * time.Second)
	}
	seedValue := uint64(now.UnixNano())
	showBar := term.IsTerminal(int(os.Stderr.Fd()))

	if c.Events > 0 {
		start := time.Now()
		gen := seed.NewGenerator(seedValue, spanStart)
		err := inBatches(c.Events, c.Batch, showBar, "audit events", func(n int) (int64, error) {
			if _, err := a.RecordAuditEvents(ctx, id, app.RecordAuditEventsInput{Events: gen.Events(c.Project, n)}); err != nil {
				return 0, err
			}
			return int64(n), nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "seeded %d events into %s/%s in %s\n", c.Events, c.Tenant, c.Project, time.Since(start).Round(time.Millisecond))
	}
	if c.Alarms > 0 {
		start := time.Now()
		gen := seed.NewAlarmGenerator(seedValue+1, spanStart, now, c.Alarms)
		var appended int64
		err := inBatches(c.Alarms, c.HistoryBatch, showBar, "alarm history", func(n int) (int64, error) {
			k, err := a.AppendAlarmHistory(ctx, id, c.Project, gen.Entries(n))
			appended += k
			return k, err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "seeded %d alarm history entries into %s/%s in %s\n", appended, c.Tenant, c.Project, time.Since(start).Round(time.Millisecond))
	}
	if c.Telemetry > 0 {
		start := time.Now()
		gen := seed.NewTelemetryGenerator(seedValue+2, spanStart, now, c.Telemetry)
		var appended int64
		err := inBatches(c.Telemetry, c.HistoryBatch, showBar, "telemetry", func(n int) (int64, error) {
			k, err := a.AppendTelemetryHistory(ctx, id, c.Project, gen.Points(n))
			appended += k
			return k, err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "seeded %d telemetry points (%d devices × %d metrics, every %s) into %s/%s in %s\n",
			appended, len(seed.Devices), len(seed.Metrics), gen.Interval(), c.Tenant, c.Project, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// inBatches calls appendBatch with batch sizes adding up to total, at most
// batch each, advancing a progress bar on stderr when showBar is set.
// appendBatch returns how many of its n items were stored.
func inBatches(total, batch int, showBar bool, what string, appendBatch func(n int) (int64, error)) error {
	var bar *progressbar.ProgressBar
	if showBar {
		bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("seeding "+what), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rows"), progressbar.OptionClearOnFinish())
	}
	for done := 0; done < total; {
		n := min(batch, total-done)
		if _, err := appendBatch(n); err != nil {
			return fmt.Errorf("after %d %s: %w", done, what, err)
		}
		done += n
		if bar != nil {
			_ = bar.Add(n)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return nil
}
