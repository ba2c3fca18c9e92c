// Command aether is the Aether Audit service: it serves the GraphQL, REST
// and SSE audit API, applies migrations, mints development tokens and seeds
// demo data. Every setting is a flag with an AETHER_* (or DATABASE_URL)
// environment variable; `aether --help` and `aether <command> --help` list
// them all. `aether export download` fetches a data export from a running
// server and verifies it; `aether verify` checks an audit export offline;
// `aether relay` ships a producer's transactional outbox to a running server.
// `aether mcp` is an MCP server on stdio for desktop assistants.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kong"

	"github.com/aetheriot/aether-audit/verify"
)

// cli is the command line: one sub-command per task.
type cli struct {
	Serve   serveCmd   `cmd:"" help:"Serve the API (applies migrations first)."`
	Migrate migrateCmd `cmd:"" help:"Apply database migrations and exit."`
	Token   tokenCmd   `cmd:"" help:"Print a signed development token (HS256) on stdout."`
	Seed    seedCmd    `cmd:"" help:"Append demo audit events, alarm history and telemetry through the application command path."`
	Export  exportCmd  `cmd:"" help:"Work with data exports of a running server."`
	Verify  verifyCmd  `cmd:"" help:"Verify an NDJSON audit export offline (chain, sequences, signed checkpoint): exit 0 verified, 1 failed, 2 bad usage or input."`
	Relay   relayCmd   `cmd:"" help:"Ship a producer's transactional outbox (the aether_outbox table) to a running Aether Audit, as a sidecar."`
	MCP     mcpCmd     `cmd:"" name:"mcp" help:"Serve the MCP interface on stdin/stdout for desktop clients, over the GraphQL API of a running server."`
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
			if verifying(parseErr.Context) {
				// aether verify's documented status for bad usage.
				exit := parser.Exit
				parser.Exit = func(int) { exit(verify.ExitUsage) }
			}
		}
		parser.FatalIfErrorf(err)
	}
	kctx.BindTo(context.Background(), (*context.Context)(nil))
	if err := kctx.Run(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code) // the command has said why
		}
		fmt.Fprintln(os.Stderr, "aether:", err)
		os.Exit(1)
	}
}

// verifying reports whether the command line being parsed is aether verify.
func verifying(kctx *kong.Context) bool {
	for _, p := range kctx.Path {
		if p.Command != nil && p.Command.Name == "verify" {
			return true
		}
	}
	return false
}
