package main

import (
	"context"
	"io"
	"time"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

// prog is the binary: each benchmark lives in its own file and registers
// itself in init.
var prog = cli.Program{
	Name:  "feedmesh-bench",
	About: "feedmesh-bench: the benchmarks of feedmesh (kept out of the feedmesh binary)",
	Noun:  "benchmark",
	Arg:   "<name>",
	// Every benchmark returns on its context within seconds
	// (TestSIGTERMStopsClusterBenchmark); this bounds one that would not.
	StopGrace: 15 * time.Second,
}

func registerBench(c cli.Command) { prog.Register(c) }

func main() { prog.Main() }

// run is the program's entry point for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return prog.Run(ctx, args, stdout, stderr)
}
