package main

import (
	"context"
	"io"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

// prog is the binary: each subcommand lives in its own file and registers
// itself in init, so subcommands can be added without touching this file.
var prog = cli.Program{
	Name:   "feedmesh",
	About:  "feedmesh: a peer-to-peer input-data service for ML training",
	Noun:   "command",
	Arg:    "<command>",
	Footer: "Benchmarks: feedmesh-bench (go run ./cmd/feedmesh-bench --help)",
	// bench ran the benchmarks before they moved to their own binary.
	Moved: map[string]string{"bench": "feedmesh bench: the benchmarks moved to their own binary, feedmesh-bench: go run ./cmd/feedmesh-bench <name> [flags] (feedmesh-bench --help lists them)"},
}

func register(c cli.Command) { prog.Register(c) }

func main() { prog.Main() }

// run is the program's entry point for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return prog.Run(ctx, args, stdout, stderr)
}
