// Package migrations embeds the SQL migrations of Aether Audit's own tables,
// applied in order by goose (see store.Migrate). River's tables are migrated
// separately with rivermigrate. Files are named NNNNN_what.sql and never
// edited once released: a change is a new file.
package migrations

import "embed"

// FS holds the *.sql migration files.
//
//go:embed *.sql
var FS embed.FS
