package main

import "context"

// migrateCmd applies migrations and, with --app-role, sets up the runtime
// role, then exits.
type migrateCmd struct {
	databaseFlags
	AppRole string `name:"app-role" env:"AETHER_APP_ROLE" help:"Runtime role to create or update after migrating, for aether serve to connect as: a LOGIN role (no superuser) that may append audit events and read them, advance chain heads and run the retention purge function, and read and write the other tables, but never UPDATE, DELETE, TRUNCATE, alter or drop the events. Its grants are (re)applied each run. Password: the environment variable AETHER_APP_ROLE_PASSWORD (none when unset, for trust or peer authentication; never logged). The DATABASE_URL login must own the tables (and have CREATEROLE unless the role exists). The embedded database uses aether_app without this flag."`
}

// Run implements the migrate command.
func (c *migrateCmd) Run(ctx context.Context) error {
	logger := c.logger()
	db, err := c.openMigrated(ctx, logger, true, c.AppRole)
	if err != nil {
		return err
	}
	defer db.close(ctx)
	logger.Info("database is up to date")
	return nil
}
