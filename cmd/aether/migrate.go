package main

import "context"

// migrateCmd applies migrations and exits.
type migrateCmd struct {
	databaseFlags
}

// Run implements the migrate command.
func (c *migrateCmd) Run(ctx context.Context) error {
	logger := c.logger()
	db, err := c.openDatabase(ctx, logger)
	if err != nil {
		return err
	}
	db.keepCluster = true
	defer db.close(ctx)
	if err := db.migrate(ctx, logger); err != nil {
		return err
	}
	logger.Info("database is up to date")
	return nil
}
