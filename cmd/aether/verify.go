package main

import (
	"context"
	"os"
	"strconv"

	"github.com/aetheriot/aether-audit/verify"
)

// verifyCmd checks an NDJSON audit export offline (package verify): no
// server, no database.
type verifyCmd struct {
	Export       string `name:"export" required:"" placeholder:"FILE" help:"NDJSON audit export to verify, plain or gzip."`
	Checkpoint   string `name:"checkpoint" placeholder:"FILE.jws" help:"Signed checkpoint (compact JWS) to check the file's last event against; needs --keys."`
	Keys         string `name:"keys" placeholder:"JWKS-FILE-or-URL" help:"Checkpoint public keys: a JWKS file, or an http(s) URL such as https://aether.example/.well-known/aether/checkpoint-keys (fetched once)."`
	PreviousHash string `name:"previous-hash" placeholder:"HEX" help:"Chain hash of the event before the file's first one (64 hex digits), for a file that starts after sequence 1."`
}

// exitError ends the process with a status and no further message.
type exitError struct{ code int }

func (e exitError) Error() string { return "exit status " + strconv.Itoa(e.code) }

// ExitCode is the process's exit status.
func (e exitError) ExitCode() int { return e.code }

// Run verifies the export: exit 0 when everything verifies, 1 on a
// verification failure, 2 on bad usage or unreadable input.
func (c *verifyCmd) Run(ctx context.Context) error {
	code := verify.Run(ctx, verify.Options{
		Export: c.Export, Checkpoint: c.Checkpoint, Keys: c.Keys, PreviousHash: c.PreviousHash,
	}, os.Stdout, os.Stderr)
	if code != verify.ExitOK {
		return exitError{code}
	}
	return nil
}
