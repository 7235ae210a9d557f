package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

func init() {
	registerBench(cli.Command{Name: "coordinated", Summary: "m consumers of a bucketed text pipeline with coordinated reads on vs off: modelled training time (step = slowest consumer's padded tokens) and padding", Run: benchCoordinated})
}

// coordRun is what one (m, coordinated) run measured.
type coordRun struct {
	steps           int64
	modelled        float64 // seconds: sum over steps of StepTime
	padded, real    int64   // tokens over all consumers' batches
	stepTokens      int64   // sum over steps of m × the step's largest batch
	rounds, skipped int64
	reconnects      int64
	wall            time.Duration
}

func benchCoordinated(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("coordinated", "[--corpus FILE] [--consumers 4,8] [--json]", stderr)
	corpus := fs.String("corpus", "", "text corpus, one example per line (default: the synthetic heavy-tailed text source)")
	consumersFlag := fs.String("consumers", "4,8", "consumer counts m to measure")
	lines := fs.Int64("lines", 30000, "synthetic source: number of texts")
	meanWords := fs.Float64("mean-words", 24, "synthetic source: mean length in words of the body of the distribution")
	tailAlpha := fs.Float64("tail-alpha", 1.2, "synthetic source: Pareto shape of the 5% tail (smaller: heavier)")
	growthPct := fs.Int64("bucket-growth", 150, "bucket boundaries from 8 to 1024 tokens, each this percentage of the previous")
	padFinal := fs.Bool("pad-final-round", true, "coordinated runs pad each worker's final partial rounds out with empty batches (same tokens as uncoordinated); false drops them")
	nodes := fs.Int("nodes", 3, "in-process nodes (all workers)")
	batch := fs.Int64("batch", 16, "batch size of every bucket (the usual configuration: a fixed batch, lengths vary)")
	perToken := fs.Float64("per-token-us", 1, "modelled compute per padded token, microseconds")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: consumers, coordinated, modelled_seconds (sum over steps of the slowest consumer's padded tokens × per-token cost), speedup (the uncoordinated row's modelled_seconds / this row's), padding_fraction (padding share of the padded tokens), idle_fraction (share of m × the step's largest batch not used by the consumers' batches), steps, tokens (real), rounds_skipped (rounds of workers that had ended or died), reconnects, wall_seconds")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var ms []int
	for _, p := range cli.SplitList(*consumersFlag) {
		m, err := strconv.Atoi(p)
		if err != nil || m < 1 || m > 64 {
			return fmt.Errorf("--consumers: %q is not a count from 1 to 64", p)
		}
		ms = append(ms, m)
	}
	if *batch < 1 || !(*perToken > 0) {
		return fmt.Errorf("--batch and --per-token-us must be > 0")
	}
	var src pipeline.Source
	var roots []string
	if *corpus != "" {
		abs, err := filepath.Abs(*corpus)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("--corpus: %w", err)
		}
		src, roots = pipeline.FromFiles("lines", abs), []string{filepath.Dir(abs)}
	} else {
		src = pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: *lines, Seed: 11, SplitSize: 500, MeanWords: *meanWords, TailAlpha: *tailAlpha, MaxWords: 1024})
	}
	// Geometric boundaries: closer ones make a round's m batches (one
	// bucket) differ less in padded length, but leave more partial windows
	// at the end of the data.
	if *growthPct <= 100 {
		return fmt.Errorf("--bucket-growth: must be > 100 (percent), got %d", *growthPct)
	}
	growth := *growthPct
	var boundaries []int64
	for b := int64(8); b <= 1024; b = max(b+1, b*growth/100) {
		boundaries = append(boundaries, b)
	}
	sizes := make([]int64, len(boundaries)+1)
	for i := range sizes {
		sizes[i] = *batch
	}
	spec := pipeline.NewSpec(src)
	spec.Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 2)
	spec.Filter("length_between", fn.Args{"tensor": "tokens", "min": 1, "max": 4096})
	spec.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: boundaries, BatchSizes: sizes})

	fmt.Fprintf(stderr, "starting %d in-process nodes …\n", *nodes)
	c, cleanup, err := jobsCluster(ctx, *nodes, withData(roots))
	if err != nil {
		return err
	}
	defer cleanup()
	var rows []benchRow
	for _, m := range ms {
		var base coordRun
		for _, coord := range []bool{false, true} {
			r, err := coordinatedOnce(ctx, c, spec, m, coord, *padFinal, *perToken*1e-6)
			if err != nil {
				return fmt.Errorf("m=%d coordinated=%v: %w", m, coord, err)
			}
			if !coord {
				base = r
			}
			row := benchRow{
				"consumers": m, "coordinated": coord, "modelled_seconds": r.modelled,
				"speedup":          base.modelled / r.modelled,
				"padding_fraction": bucketing.PaddingFraction(r.real, r.padded),
				"idle_fraction":    bucketing.PaddingFraction(r.padded, r.stepTokens),
				"steps":            r.steps, "tokens": r.real, "rounds_skipped": r.skipped, "reconnects": r.reconnects, "wall_seconds": r.wall.Seconds(),
			}
			fmt.Fprintf(stderr, "  m=%d coordinated=%-5v: %d steps, modelled %.3f s, speedup %.2f, padding %.3f, %d tokens, %.2f s wall\n",
				m, coord, r.steps, r.modelled, row["speedup"], row["padding_fraction"], r.real, r.wall.Seconds())
			rows = append(rows, row)
		}
	}
	return printRows(stdout, *jsonOut, []string{"consumers", "coordinated", "modelled_seconds", "speedup", "padding_fraction", "idle_fraction", "steps", "tokens", "rounds_skipped", "reconnects", "wall_seconds"}, rows)
}

// coordinatedOnce reads the whole dataset with m consumers in lock step:
// each step takes every consumer's next batch (a consumer at its end of
// data contributes nothing) and costs the slowest one's padded tokens.
// Uncoordinated, the m consumers read one ordinary DYNAMIC job; coordinated,
// one coordinated job with indexes 0..m-1 (final partial rounds padded out
// unless pad is false, so both read the same tokens).
func coordinatedOnce(ctx context.Context, c *localcluster.Cluster, spec *pipeline.Spec, m int, coord, pad bool, perToken float64) (coordRun, error) {
	name := fmt.Sprintf("coord-%v-m%d-%d", coord, m, time.Now().UnixNano())
	its := make([]*client.Iterator, m)
	for i := range m {
		cl, err := benchClient(ctx, c, i%c.N())
		if err != nil {
			return coordRun{}, err
		}
		defer cl.Close()
		o := client.JobOptions{Name: name, Sharding: client.Dynamic, Workers: client.AllWorkers, GCAfter: 200 * time.Millisecond}
		if coord {
			o.Coordinated, o.NumConsumers, o.ConsumerIndex, o.PadFinalRound = true, m, i, pad
		}
		it, err := cl.Distribute(ctx, spec, o)
		if err != nil {
			return coordRun{}, err
		}
		defer it.Close()
		its[i] = it
	}
	var r coordRun
	start := time.Now()
	done := make([]bool, m)
	padded := make([]int64, m)
	for left := m; left > 0; {
		var stepMax int64
		active := false
		for i, it := range its {
			padded[i] = 0
			if done[i] {
				continue
			}
			b, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				done[i] = true
				left--
				continue
			}
			if err != nil {
				return coordRun{}, err
			}
			p, real, err := batchTokens(b)
			if err != nil {
				return coordRun{}, err
			}
			padded[i] = p
			r.padded += p
			r.real += real
			stepMax = max(stepMax, p)
			active = true
		}
		if !active {
			break
		}
		r.steps++
		r.modelled += bucketing.StepTime(padded, perToken)
		r.stepTokens += int64(m) * stepMax
	}
	r.wall = time.Since(start)
	for _, it := range its {
		st := it.Stats()
		r.rounds += st.Rounds
		r.skipped += st.SkippedRounds
		r.reconnects += st.Reconnects
		it.Close() // detach before waiting for the job to be collected
	}
	return r, waitIdle(c)
}

// batchTokens is a bucketed batch's padded and real token counts, from its
// "tokens" tensor's shape and "tokens_length".
func batchTokens(b client.Batch) (padded, real int64, err error) {
	lt, ok := b.Get(tensor.LengthsName("tokens"))
	if !ok {
		return 0, 0, errors.New("batch without tokens_length: is bucket_by_sequence_length the last op?")
	}
	ls, err := lt.Int32s()
	if err != nil {
		return 0, 0, err
	}
	lens := make([]int64, len(ls))
	for i, l := range ls {
		lens[i] = int64(l)
		real += int64(max(l, 0))
	}
	return bucketing.PaddedTokens(lens), real, nil
}
