package main

import "context"

// migrateCmd applies migrations and exits.
type migrateCmd struct {
	databaseFlags
}

// Run implements the migrate command.
func (c *migrateCmd) Run(ctx context.Context) error {
	logger := c.logger()
	db, err := c.openMigrated(ctx, logger, true)
	if err != nil {
		return err
	}
	defer db.close(ctx)
	logger.Info("database is up to date")
	return nil
}
