package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// benchmark is one `feedmesh-bench NAME`. Each prints a table, or with
// --json an array of row objects.
type benchmark struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var benchmarks = map[string]benchmark{}

func registerBench(b benchmark) {
	if _, dup := benchmarks[b.name]; dup {
		panic("feedmesh-bench: benchmark registered twice: " + b.name)
	}
	benchmarks[b.name] = b
}

// runBench runs the benchmark args[0] names, or lists them all.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "feedmesh-bench: unknown benchmark %q\n\n", args[0])
		usage(stderr)
		return errUsage
	}
	return b.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(benchmarks))
	for n := range benchmarks {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "feedmesh-bench: the benchmarks of feedmesh (kept out of the feedmesh binary)")
	fmt.Fprintln(w, "\nUsage: feedmesh-bench <name> [flags]   (feedmesh-bench <name> --help for its flags and JSON fields)")
	fmt.Fprintln(w, "\nBenchmarks:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, benchmarks[n].summary)
	}
}

// median of durations (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fmtDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.0f", ms(d))
	}
	return strings.Join(parts, " ")
}
