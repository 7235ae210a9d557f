package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	registerBench(cli.Command{Name: "autocache", Summary: "epoch time computing a pipeline's prefix vs putting it in the autocache vs getting it back, and the automatic decision, per scenario", Run: benchAutocache})
}

// autocacheScenario is one pipeline and the disk it runs against.
type autocacheScenario struct {
	name string
	spec func(mode string) *pipeline.Spec
	// readLimit throttles the nodes' cache reads (bytes/s; 0: the disk's
	// own speed).
	readLimit float64
}

func benchAutocache(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("autocache", "[--scenarios expensive,large-slow] [--json]", stderr)
	scenarios := fs.String("scenarios", "expensive,large-slow", "expensive: a CPU-heavy deterministic prefix with small elements; large-slow: a cheap prefix with large elements on a disk throttled to --slow-read")
	nodes := fs.Int("nodes", 2, "in-process nodes (all workers)")
	elements := fs.Int64("elements", 4000, "expensive: dataset size (range source)")
	cpuUs := fs.Int64("cpu-us", 500, "expensive: CPU each element's prefix burns (cost op)")
	records := fs.Int64("records", 400, "large-slow: records (synthetic source)")
	recordBytes := fs.Int("record-bytes", 256<<10, "large-slow: bytes per record")
	slowRead := fs.Float64("slow-read", 20e6, "large-slow: the nodes' cache read limit, bytes/s")
	profile := fs.Int64("profile", 100, "elements a worker profiles before it decides (mesh.Config Autocache.ProfileElements)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: scenario, mode (compute, put, get, auto), epoch, epoch_seconds, decision (auto rows), compute_s_per_1000, read_s_per_1000, bytes_per_element")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	all := map[string]autocacheScenario{
		"expensive": {name: "expensive", spec: func(mode string) *pipeline.Spec {
			s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: *elements, SplitSize: 50}})
			return s.Cost(*cpuUs, 0).AutocacheMode(mode).Shuffle(256, 1).Batch(32, false)
		}},
		"large-slow": {name: "large-slow", readLimit: *slowRead, spec: func(mode string) *pipeline.Spec {
			s := pipeline.NewSpec(pipeline.Source{Synthetic: &pipeline.SyntheticSource{Kind: "records", Count: *records, RecordBytes: *recordBytes, SplitSize: 10}})
			return s.AutocacheMode(mode).Shuffle(16, 1).Batch(4, false)
		}},
	}
	var rows []benchRow
	for _, name := range cli.SplitList(*scenarios) {
		sc, ok := all[name]
		if !ok {
			return fmt.Errorf("--scenarios: unknown scenario %q (expensive, large-slow)", name)
		}
		rs, err := autocacheScenarioRun(ctx, sc, *nodes, *profile, stderr)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", name, err)
		}
		rows = append(rows, rs...)
	}
	return printRows(stdout, *jsonOut, []string{"scenario", "mode", "epoch", "epoch_seconds", "decision", "compute_s_per_1000", "read_s_per_1000", "bytes_per_element"}, rows)
}

// autocacheScenarioRun measures one scenario, each mode on a fresh
// cluster (so no mode reads what another put): compute (mode compute, one
// epoch), put then get (mode cache, two jobs of one epoch: the first puts,
// the second gets), auto (mode auto, two jobs of one epoch: the first
// profiles while it puts and decides, the second follows the decision).
func autocacheScenarioRun(ctx context.Context, sc autocacheScenario, nodes int, profile int64, stderr io.Writer) ([]benchRow, error) {
	var rows []benchRow
	for _, mode := range []string{pipeline.AutocacheCompute, pipeline.AutocacheCache, pipeline.AutocacheAuto} {
		c, cleanup, err := jobsCluster(ctx, nodes, localcluster.WithConfig(func(_ int, cfg *mesh.Config) {
			cfg.Autocache.ReadBytesPerSec = sc.readLimit
			cfg.Autocache.ProbeBytes = 1 << 20
			cfg.CacheBytes = 4 << 30
			cfg.Autocache.ProfileElements = profile
		}))
		if err != nil {
			return nil, err
		}
		// A first job warms the cluster up (connections, the leader's
		// first leases) outside the figures.
		warm := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1000, SplitSize: 50}}).Batch(32, false)
		if _, _, err := autocacheEpoch(ctx, c, warm, "ac-warmup"); err != nil {
			cleanup()
			return nil, err
		}
		jobs := 2
		if mode == pipeline.AutocacheCompute {
			jobs = 1
		}
		for j := 0; j < jobs; j++ {
			secs, info, err := autocacheEpoch(ctx, c, sc.spec(mode), fmt.Sprintf("ac-%s-%s-%d", sc.name, mode, j))
			if err != nil {
				cleanup()
				return nil, err
			}
			r := benchRow{"scenario": sc.name, "epoch": j + 1, "epoch_seconds": secs}
			switch {
			case mode == pipeline.AutocacheCompute:
				r["mode"] = "compute"
			case mode == pipeline.AutocacheCache && j == 0:
				r["mode"] = "put"
			case mode == pipeline.AutocacheCache:
				r["mode"] = "get"
			default:
				r["mode"] = "auto"
				r["decision"] = "profiling"
				if info.Decision != nil {
					r["decision"] = info.Decided()
					r["compute_s_per_1000"] = info.Decision.ComputeSeconds
					r["read_s_per_1000"] = info.Decision.ReadSeconds
					r["bytes_per_element"] = info.Decision.BytesPerElement
				}
			}
			fmt.Fprintf(stderr, "  %-10s %-7s job %d: %6.2f s %v\n", sc.name, r["mode"], j+1, secs, r["decision"])
			rows = append(rows, r)
		}
		cleanup()
	}
	return rows, nil
}

// autocacheEpoch reads one epoch of spec as a new DYNAMIC job and returns
// its time and, for the auto rows, the job's autocache point as the
// cluster recorded it once the read ended (the decision, when one is
// made, lands while the first job still reads: it waits up to 10 s for
// it).
func autocacheEpoch(ctx context.Context, c *localcluster.Cluster, spec *pipeline.Spec, job string) (float64, api.AutocacheInfo, error) {
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return 0, api.AutocacheInfo{}, err
	}
	defer cl.Close()
	start := time.Now()
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: job, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 1})
	if err != nil {
		return 0, api.AutocacheInfo{}, err
	}
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			it.Close()
			return 0, api.AutocacheInfo{}, err
		}
		b.Release()
	}
	secs := time.Since(start).Seconds()
	it.Close()
	var info api.AutocacheInfo
	localcluster.Poll(10*time.Second, func() bool {
		jobs, err := cl.Jobs(ctx)
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.Name == job && len(j.Autocache) == 1 {
				info = j.Autocache[0]
				return info.Mode != pipeline.AutocacheAuto || info.Decision != nil
			}
		}
		return j0(jobs, job)
	})
	return secs, info, nil
}

// j0: a job without autocache points has nothing to wait for.
func j0(jobs []api.JobInfo, job string) bool {
	for _, j := range jobs {
		if j.Name == job {
			return len(j.Autocache) == 0
		}
	}
	return false
}
