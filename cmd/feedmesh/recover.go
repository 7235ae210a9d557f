package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/mesh"
)

func init() {
	register(cli.Command{Name: "recover", Summary: "after losing a Raft quorum for good: make the stopped survivors the only voters", Run: runRecover})
}

// dirList is a repeatable --data-dir.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }
func (d *dirList) Set(v string) error {
	if v == "" {
		return fmt.Errorf("empty data dir")
	}
	*d = append(*d, v)
	return nil
}

// runRecover reads no FEEDMESH_* environment on purpose: which data dirs
// to rewrite is given on the command line, explicitly.
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("recover", "--data-dir DIR [--data-dir DIR2 ...] [--voters n1,n2]", stderr)
	var dirs dirList
	fs.Var(&dirs, "data-dir", "data dir of a stopped surviving node (repeat for every survivor on this machine)")
	voters := fs.String("voters", "", "comma-separated names of every surviving voter, the same list on every machine (default: the nodes of the --data-dir given)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(dirs) == 0 {
		fmt.Fprintln(stderr, "give the data dir of every stopped survivor on this machine with --data-dir")
		fs.Usage()
		return cli.ErrUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	results, err := mesh.Recover(dirs, cli.SplitList(*voters), logger)
	for _, r := range results {
		fmt.Fprintf(stdout, "node %s (%s): Raft configuration was %s; now the voters are %s.\n", r.Name, r.DataDir, describe(r.Before), describe(r.After))
		fmt.Fprintf(stdout, "  its log up to index %d is now a snapshot and counts as committed.\n", r.LastIndex)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Start these nodes again with their usual command lines: they elect a leader among themselves,")
	fmt.Fprintln(stdout, "which adds voters as other nodes join. Do not restart a lost voter on its old data dir: give it a new one.")
	return nil
}

func describe(cfg []plan.ConfigServer) string {
	parts := make([]string, len(cfg))
	for i, s := range cfg {
		parts[i] = s.ID + " " + s.Suffrage + " at " + s.Addr
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
