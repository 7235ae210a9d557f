package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	registerBench(cli.Command{Name: "order", Summary: "order deterministic vs any (DYNAMIC exactly-once) on a cheap and a CPU-cost pipeline: batches/s and their ratio in one run, the reorder buffer's peak, the checkpoint's bytes", Run: benchOrder})
}

// ---- order deterministic vs any

func benchOrder(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("order", "[--nodes N] [--seconds S] [--runs N] [--json]", stderr)
	nodes := fs.Int("nodes", 3, "in-process nodes (every one a worker)")
	batch := fs.Int64("batch", 64, "batch size")
	costUs := fs.Int64("cost-us", 100, "the cost workload's CPU time per element (µs)")
	block := fs.Int64("block", pipeline.DefaultOrderBlock, "order_block: elements per block")
	window := fs.Int64("window", pipeline.DefaultOrderWindow, "order_window: blocks per window")
	seconds := fs.Float64("seconds", 3, "steady-state window measured per run, after 0.5 s of warm-up")
	runs := fs.Int("runs", 3, "alternating runs of each order; medians are reported")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: workload, order, runs, batches_per_s, run_ratio_vs_any (median of the ratios within each run), reorder_peak, checkpoint_bytes")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, cleanup, err := jobsCluster(ctx, *nodes)
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	type workload struct {
		name string
		cost int64
	}
	workloads := []workload{{"cheap", 0}, {"cost", *costUs}}
	orders := []string{jobspec.ValAny, jobspec.ValDeterministic}
	var rows []benchRow
	for _, wl := range workloads {
		spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1 << 26, SplitSize: *block * *window}})
		if wl.cost > 0 {
			spec.Cost(wl.cost, 0)
		}
		spec.Batch(*batch, false)
		rates := map[string][]float64{}
		peaks, ckBytes := []int64{}, []int64{}
		w := time.Duration(*seconds * float64(time.Second))
		for r := 0; r < *runs; r++ {
			for i := range orders {
				ord := orders[(i+r)%len(orders)]
				s := *spec
				if ord == jobspec.ValDeterministic {
					s.OrderBlock, s.OrderWindow = *block, *window
				}
				o := client.JobOptions{Name: fmt.Sprintf("order-%s-%s-%d", wl.name, ord, r), Sharding: client.Dynamic,
					Workers: client.AllWorkers, Offload: client.OffloadRemote, Order: ord, Seed: 7, GCAfter: 200 * time.Millisecond}
				rate, peak, ck, err := orderRun(ctx, cl, &s, o, w)
				if err != nil {
					return fmt.Errorf("%s %s run %d: %w", wl.name, ord, r, err)
				}
				if err := waitIdle(c); err != nil {
					return err
				}
				rate /= float64(*batch)
				rates[ord] = append(rates[ord], rate)
				if ord == jobspec.ValDeterministic {
					peaks, ckBytes = append(peaks, int64(peak)), append(ckBytes, int64(ck))
				}
				fmt.Fprintf(stderr, "  run %d %-6s %-13s %8.0f batches/s  reorder peak %d  checkpoint %d B\n", r, wl.name, ord, rate, peak, ck)
			}
			fmt.Fprintf(stderr, "  run %d %s: deterministic/any %.3f\n", r, wl.name, rates[orders[1]][r]/rates[orders[0]][r])
		}
		for _, ord := range orders {
			var ratios []float64
			for r := range rates[ord] {
				ratios = append(ratios, rates[ord][r]/rates[orders[0]][r])
			}
			row := benchRow{"workload": wl.name, "order": ord, "runs": *runs, "batches_per_s": median(rates[ord]), "run_ratio_vs_any": median(ratios)}
			if ord == jobspec.ValDeterministic {
				row["reorder_peak"], row["checkpoint_bytes"] = median(peaks), median(ckBytes)
			}
			rows = append(rows, row)
		}
	}
	return printRows(stdout, *jsonOut, []string{"workload", "order", "runs", "batches_per_s", "run_ratio_vs_any", "reorder_peak", "checkpoint_bytes"}, rows)
}

// orderRun reads job o of spec for warm-up and a measured window: its
// rows/s, the reorder buffer's peak and a checkpoint's bytes at the end.
func orderRun(ctx context.Context, cl *client.Client, spec *pipeline.Spec, o client.JobOptions, window time.Duration) (rate float64, peak, ckBytes int, err error) {
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		return 0, 0, 0, err
	}
	defer it.Close()
	if rate, err = rowsPerSecond(ctx, it, 500*time.Millisecond, window, nil); err != nil {
		return 0, 0, 0, err
	}
	if st := it.Stats(); st.Reorder != nil {
		peak = st.Reorder.Peak
	}
	ck, err := it.Checkpoint()
	if err != nil {
		return 0, 0, 0, err
	}
	return rate, peak, len(ck), nil
}
