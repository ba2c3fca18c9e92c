package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aetheriot/aether-audit/mcpserver"
)

// mcpCmd is `aether mcp`: an MCP server on stdin and stdout, for desktop
// clients that start MCP servers as local processes. It talks to a running
// Aether Audit server over its GraphQL API with the caller's token, so
// every tool runs with the token's own permissions, tenant and projects.
type mcpCmd struct {
	URL       string `name:"url" env:"AETHER_URL" default:"http://127.0.0.1:8080" help:"Base URL of the Aether Audit server (its GraphQL endpoint is <url>/graphql)."`
	TokenFile string `name:"token-file" env:"AETHER_TOKEN_FILE" required:"" type:"path" help:"File holding the bearer token (read again for every request, so a rotated token is picked up)."`
	LogLevel  string `name:"log-level" env:"AETHER_LOG_LEVEL" default:"warn" enum:"debug,info,warn,error" help:"Level of the log written to stderr (stdout carries the protocol)."`
}

// Run implements `aether mcp`.
func (c *mcpCmd) Run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	base, err := url.Parse(strings.TrimRight(c.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return errors.New("--url must be an http or https URL")
	}
	token := func() (string, error) {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return "", fmt.Errorf("reading the token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", errors.New("the token file is empty")
		}
		return tok, nil
	}
	if _, err := token(); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	backend, err := mcpserver.NewGraphQLBackend(base.String(), token, &http.Client{})
	if err != nil {
		return err
	}
	srv := mcpserver.New(mcpserver.Config{
		Backend: func(ctx context.Context, _ *mcp.RequestExtra) (context.Context, mcpserver.Backend, error) {
			return ctx, backend, nil
		},
		Logger: logger,
	})
	defer srv.Close()
	err = srv.MCP().Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
