// Command aether is the Aether Audit service: it serves the GraphQL, REST
// and SSE audit API, applies migrations, mints development tokens and seeds
// demo data. Every setting is a flag with an AETHER_* (or DATABASE_URL)
// environment variable; `aether --help` and `aether <command> --help` list
// them all. `aether export download` fetches a data export from a running
// server and verifies it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kong"
)

// cli is the command line: one sub-command per task.
type cli struct {
	Serve   serveCmd   `cmd:"" help:"Serve the API (applies migrations first)."`
	Migrate migrateCmd `cmd:"" help:"Apply database migrations and exit."`
	Token   tokenCmd   `cmd:"" help:"Print a signed development token (HS256) on stdout."`
	Seed    seedCmd    `cmd:"" help:"Append demo audit events, alarm history and telemetry through the application command path."`
	Export  exportCmd  `cmd:"" help:"Work with data exports of a running server."`
}

func main() {
	var c cli
	parser := kong.Must(&c,
		kong.Name("aether"),
		kong.Description("Aether Audit: queryable, live audit history and governed outbound work."),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	kctx, err := parser.Parse(os.Args[1:])
	if err != nil {
		// Usage after a command-line mistake goes to stderr: stdout is
		// reserved for results (aether token prints only the token).
		var parseErr *kong.ParseError
		if errors.As(err, &parseErr) && parseErr.Context != nil {
			parser.Stdout = os.Stderr
			_ = parseErr.Context.PrintUsage(true)
		}
		parser.FatalIfErrorf(err)
	}
	kctx.BindTo(context.Background(), (*context.Context)(nil))
	if err := kctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "aether:", err)
		os.Exit(1)
	}
}
