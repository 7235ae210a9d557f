package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/pqshard"
	"github.com/feedmesh/feedmesh/internal/s3test"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

func init() {
	registerBench(cli.Command{Name: "objstore", Summary: "a DYNAMIC job over Parquet shards in a local S3 server (versitygw) vs the same shards on local disk", Run: benchObjstore})
}

func benchObjstore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("objstore", "[--nodes N] [--shards N] [--rows N] [--runs N] [--json]", stderr)
	nodes := fs.Int("nodes", 4, "in-process nodes (workers)")
	shards := fs.Int("shards", 64, "Parquet shards")
	rows := fs.Int64("rows", 10000, "rows per shard")
	perGroup := fs.Int64("row-group", 2500, "rows per row group (a split each)")
	words := fs.Int("words", 64, "a row holds 1 to this many tokens")
	batch := fs.Int64("batch", 256, "batch size (padded_batch of id and tokens)")
	runs := fs.Int("runs", 3, "jobs per source, alternating; medians are reported")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: source, runs, seconds, rows_per_s, file_mb_per_s, ratio_vs_local (of the medians), run_ratio_vs_local (median of the ratios within each run), cpu_s (CPU seconds of this process: client and workers), server_cpu_s (of the S3 server process)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: feedmesh-bench objstore [flags]\n\n"+
			"Writes --shards Parquet shards (internal/pqshard: id, text, tokens), puts them in a versitygw\n"+
			"server on loopback (built from tools/versitygw on first use and cached; FEEDMESH_VERSITYGW names a\n"+
			"binary instead) and in a local directory, then runs a DYNAMIC job over each with --nodes in-process\n"+
			"workers, alternating, and times each job from Distribute to the last batch.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "feedmesh-bench-objstore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	srv, err := s3test.Start(ctx, filepath.Join(dir, "s3"))
	if err != nil {
		return err
	}
	defer srv.Close()
	os.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	if err := srv.MakeBucket(ctx, "bench"); err != nil {
		return err
	}
	var total int64
	for s := range *shards {
		p := filepath.Join(local, fmt.Sprintf("shard-%05d.parquet", s))
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := pqshard.Write(f, int64(s)**rows, *rows, *perGroup, *words); err != nil {
			return err
		}
		f.Close()
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		total += int64(len(b))
		if err := srv.Put(ctx, "bench", "shards/"+filepath.Base(p), b); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "  %d shards, %d rows, %.1f MB of Parquet\n", *shards, int64(*shards)**rows, float64(total)/1e6)

	c, cleanup, err := jobsCluster(ctx, *nodes, withData([]string{local}, srv.NamedStore("bench")))
	if err != nil {
		return err
	}
	defer cleanup()
	defer objstore.CloseIdleConnections()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	specs := map[string]*pipeline.Spec{}
	for _, src := range []string{"local", "s3"} {
		fsrc := &pipeline.FilesSource{Format: "parquet", Columns: []string{"id", "tokens"}}
		if src == "local" {
			fsrc.Paths = []string{filepath.Join(local, "shard-*.parquet")}
		} else {
			fsrc.Paths = []string{"s3://bench/bench/shards/shard-*.parquet"} // the nodes' store "bench", its bucket "bench"
		}
		specs[src] = pipeline.NewSpec(pipeline.Source{Files: fsrc}).PaddedBatch(*batch, 0)
	}
	want := int64(*shards) * *rows
	secs := map[string][]float64{}
	// CPU seconds per run: this process (client and workers) and the S3
	// server; less sensitive to the machine's other load than seconds.
	cpu, srvCPU := map[string][]float64{}, map[string][]float64{}
	for r := 0; r < *runs; r++ {
		order := []string{"local", "s3"}
		if r%2 == 1 {
			order = []string{"s3", "local"}
		}
		for _, src := range order {
			c0 := processCPU()
			s0, err := srv.CPU()
			if err != nil {
				return err
			}
			d, n, err := timeJob(ctx, cl, specs[src], fmt.Sprintf("objstore-%s-%d", src, r))
			if err != nil {
				return fmt.Errorf("%s run %d: %w", src, r, err)
			}
			s1, err := srv.CPU()
			if err != nil {
				return err
			}
			pc, sc := (processCPU() - c0).Seconds(), (s1 - s0).Seconds()
			cpu[src], srvCPU[src] = append(cpu[src], pc), append(srvCPU[src], sc)
			if n != want {
				return fmt.Errorf("%s run %d: %d rows delivered, want %d", src, r, n, want)
			}
			secs[src] = append(secs[src], d.Seconds())
			if err := waitIdle(c); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "  run %d %-5s %6.2f s  %9.0f rows/s  %6.1f MB/s  CPU %5.2f s feedmesh + %5.2f s S3 server\n", r, src, d.Seconds(), float64(n)/d.Seconds(), float64(total)/d.Seconds()/1e6, pc, sc)
		}
	}
	var ratios []float64
	for r := range secs["s3"] {
		ratios = append(ratios, secs["local"][r]/secs["s3"][r])
	}
	var out []benchRow
	localRate := float64(want) / median(secs["local"])
	for _, src := range []string{"local", "s3"} {
		m := median(secs[src])
		row := benchRow{"source": src, "runs": *runs, "seconds": m, "rows_per_s": float64(want) / m, "file_mb_per_s": float64(total) / m / 1e6, "ratio_vs_local": float64(want) / m / localRate,
			"cpu_s": median(cpu[src]), "server_cpu_s": median(srvCPU[src])}
		if src == "s3" {
			row["run_ratio_vs_local"] = median(ratios)
		}
		out = append(out, row)
	}
	return printRows(stdout, *jsonOut, []string{"source", "runs", "seconds", "rows_per_s", "file_mb_per_s", "ratio_vs_local", "run_ratio_vs_local", "cpu_s", "server_cpu_s"}, out)
}

// timeJob runs a DYNAMIC job to its end: its duration and the rows
// delivered (the batches' leading dimension).
func timeJob(ctx context.Context, cl *client.Client, spec *pipeline.Spec, name string) (time.Duration, int64, error) {
	start := time.Now()
	// A short GCAfter: the next job starts on idle workers (waitIdle).
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, GCAfter: 300 * time.Millisecond})
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	var n int64
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return time.Since(start), n, nil
		}
		if err != nil {
			return 0, n, err
		}
		id, ok := b.Get("id")
		if !ok || len(id.Shape) == 0 {
			return 0, n, fmt.Errorf("batch without an id column: %+v", b.Element)
		}
		n += id.Shape[0]
	}
}
