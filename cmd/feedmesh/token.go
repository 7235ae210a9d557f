package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

func init() {
	register(cli.Command{Name: "token", Summary: "create or revoke an access token of a tenant (administrators; token create, token revoke)", Run: runToken,
		Nested: []string{"create", "revoke"}})
}

const tokenUsage = `Usage: feedmesh token create --id ID [--tenant T] [--admin] [--addr host:port] [--tls-* ...]
       feedmesh token revoke --id ID [--addr host:port] [--tls-* ...]

An access token makes its holder a principal of a tenant (or an
administrator), whatever client certificate it connects with: give it to
a client with --token (or FEEDMESH_TOKEN; client.Options.Token in Go,
token= in Python). The cluster keeps its secret's SHA-256 only: the token
is printed once. Only administrators create and revoke tokens
(docs/operating/security.md, "Tokens").

  feedmesh token create --help     its flags
  feedmesh token revoke --help     its flags
`

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return cli.ErrUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stderr, tokenUsage)
		return flag.ErrHelp
	case "create":
		return runTokenCreate(ctx, args[1:], stdout, stderr)
	case "revoke":
		return runTokenRevoke(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "feedmesh token: want `create` or `revoke`, got %q\n\n%s", strings.Join(args, " "), tokenUsage)
	return cli.ErrUsage
}

func runTokenCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("token create", "--id ID [--tenant T] [--admin] [flags]", stderr)
	cf := addConnFlags(fs)
	id := fs.String("id", "", "the token's name (letters, digits, '.', '_', '-'): what the audit log names its holder by (token:ID), and what revoke takes")
	tenant := fs.String("tenant", "", "the tenant of the token's holder (default: the default tenant)")
	admin := fs.Bool("admin", false, "an administrator's token")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return cli.InputError(errors.New("--id is required"))
	}
	var tok string
	if err := cf.with(ctx, func(c *client.Client, ctx context.Context) (err error) {
		tok, err = c.TokenCreate(ctx, *id, *tenant, *admin)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

func runTokenRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("token revoke", "--id ID [flags]", stderr)
	cf := addConnFlags(fs)
	id := fs.String("id", "", "the token to revoke")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return cli.InputError(errors.New("--id is required"))
	}
	if err := cf.with(ctx, func(c *client.Client, ctx context.Context) error { return c.TokenRevoke(ctx, *id) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked token %s\n", *id)
	return nil
}
