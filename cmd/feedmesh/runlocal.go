package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	register(cli.Command{
		Name:    "run-local",
		Summary: "run a pipeline spec in-process and print throughput and per-op statistics",
		Run:     runLocal,
	})
}

// runLocal is `feedmesh run-local SPEC [--take N] [--json]`. Flags may come
// before or after SPEC.
func runLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("run-local", "SPEC [--take N] [--json] [--no-stats] [--data-root DIR]... [--allow-host HOST]... [--object-store NAME=...]...", stderr)
	take := fs.Int64("take", 0, "stop after `N` outputs of the last op (batches when it batches); 0 runs to the end")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	noStats := fs.Bool("no-stats", false, "turn per-op statistics off (to measure their overhead)")
	data := addDataFlags(fs, false)
	specArg, err := parseSpecArg(fs, args, stderr)
	if err != nil {
		return err
	}
	if *take < 0 {
		fmt.Fprintln(stderr, "run-local: --take must be >= 0")
		return cli.ErrUsage
	}
	spec, err := pipeline.LoadFile(specArg)
	if err != nil {
		return err
	}
	acc, err := data.localAccess()
	if err != nil {
		return err
	}
	defer acc.Close()
	report, err := pipeline.RunLocal(ctx, spec.Bind(acc), pipeline.RunOptions{Take: *take, DisableStats: *noStats})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(report)
	}
	return report.WriteTable(stdout)
}
