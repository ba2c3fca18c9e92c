package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
)

// tokenCmd prints a development token signed with the local HS256 secret.
type tokenCmd struct {
	dataDirFlags
	secretFlags
	Tenant      string        `name:"tenant" required:"" help:"Tenant id (tenant_id claim)."`
	Projects    []string      `name:"project" required:"" help:"Project id the token may access; repeat for several; * for every project of the tenant."`
	Permissions string        `name:"permissions" default:"audit:read" help:"Comma-separated permissions, e.g. audit:read,audit:write."`
	Subject     string        `name:"subject" default:"dev" help:"Subject (sub claim)."`
	TTL         time.Duration `name:"ttl" default:"1h" help:"Lifetime of the token."`
}

// Run implements the token command: the token alone on stdout.
func (c *tokenCmd) Run() error {
	secret, err := hmacSecret(c.secretFlags, c.dataDirFlags)
	if err != nil {
		return err
	}
	var perms []app.Permission
	for _, p := range strings.Split(c.Permissions, ",") {
		if p = strings.TrimSpace(p); p != "" {
			perms = append(perms, app.Permission(p))
		}
	}
	tok, err := auth.MintHS256(secret, auth.TokenRequest{
		Subject: c.Subject, TenantID: c.Tenant, ProjectIDs: c.Projects, Permissions: perms, TTL: c.TTL,
	}, time.Now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(os.Stdout, tok)
	return err
}
