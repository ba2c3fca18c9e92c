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

// seedCmd appends demo events through the RecordAuditEvents use case.
type seedCmd struct {
	databaseFlags
	Tenant  string `name:"tenant" required:"" help:"Tenant id."`
	Project string `name:"project" required:"" help:"Project id."`
	Events  int    `name:"events" default:"1000" help:"Number of events to append."`
	Batch   int    `name:"batch" default:"500" help:"Events per transaction (1-1000)."`
}

// Run implements the seed command.
func (c *seedCmd) Run(ctx context.Context) error {
	if c.Events < 1 {
		return fmt.Errorf("--events must be at least 1")
	}
	if c.Batch < 1 || c.Batch > app.MaxRecordBatch {
		return fmt.Errorf("--batch must be between 1 and %d", app.MaxRecordBatch)
	}
	logger := c.logger()
	db, err := c.openMigrated(ctx, logger, true)
	if err != nil {
		return err
	}
	defer db.close(ctx)
	a := app.New(store.New(db.Pool), app.Config{Logger: logger})
	id := app.Identity{Subject: "seed", TenantID: c.Tenant, ProjectIDs: []string{c.Project},
		Permissions: []app.Permission{app.PermissionAuditWrite}}

	var bar *progressbar.ProgressBar
	if term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions(c.Events, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("seeding"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("events"), progressbar.OptionClearOnFinish())
	}
	gen := seed.NewGenerator(uint64(time.Now().UnixNano()), time.Now().Add(-time.Duration(c.Events)*3*time.Second))
	start := time.Now()
	for done := 0; done < c.Events; {
		n := min(c.Batch, c.Events-done)
		if _, err := a.RecordAuditEvents(ctx, id, app.RecordAuditEventsInput{Events: gen.Events(c.Project, n)}); err != nil {
			return fmt.Errorf("after %d events: %w", done, err)
		}
		done += n
		if bar != nil {
			_ = bar.Add(n)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	fmt.Fprintf(os.Stderr, "seeded %d events into %s/%s in %s\n", c.Events, c.Tenant, c.Project, time.Since(start).Round(time.Millisecond))
	return nil
}
