package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

// envName is the environment variable that sets a flag: --gossip-port reads
// FEEDMESH_GOSSIP_PORT.
func envName(flagName string) string {
	return "FEEDMESH_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable, so deployments can configure nodes either way.
// Command-line flags win.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// flagGiven reports whether the flag was set, on the command line or
// from the environment.
func flagGiven(fs *flag.FlagSet, name string) (given bool) {
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// addEnvToUsage appends each flag's environment variable to its help text.
func addEnvToUsage(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage += " (env " + envName(f.Name) + ")"
	})
}

// parseWithEnv parses args, then fills the rest from the environment.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	addEnvToUsage(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := applyEnv(fs); err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	return nil
}

// loadGossipKey accepts base64 of 32 bytes, or a path to a file holding it.
func loadGossipKey(v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	text := v
	if b, err := os.ReadFile(v); err == nil {
		text = strings.TrimSpace(string(b))
	}
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key: want base64 of 32 bytes (e.g. `head -c32 /dev/urandom | base64`) or a file holding it: %v", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("--gossip-key: decodes to %d bytes, want 32", len(key))
	}
	return key, nil
}

// parseSpecArg parses args for a command that takes one SPEC file, with
// flags before or after it (`run-local`, `diagnose`), and returns it. A
// wrong count prints usage and returns cli.ErrUsage.
func parseSpecArg(fs *flag.FlagSet, args []string, stderr io.Writer) (string, error) {
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return "", err
	}
	if len(positional) != 1 {
		fmt.Fprintf(stderr, "%s: want exactly one SPEC file, got %d\n", fs.Name(), len(positional))
		fs.Usage()
		return "", cli.ErrUsage
	}
	return positional[0], nil
}

// parseInterleaved parses args with flags before, between or after the
// positional arguments, and returns those.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, err
			}
			return nil, cli.ErrUsage
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
