package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/slowlink"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	registerBench(cli.Command{Name: "offload", Summary: "offload (FastFlow): a training loop of fixed rate reading a sleep-cost pipeline with its local worker, k remote workers, or both: rows/s into the loop and remote worker-seconds per config (local, remote, fractions, auto)", Run: benchOffload})
}

// The offload benchmark emulates CPU budgets on a small machine honestly:
// the pipeline's expensive op is a map of the `cost` function with
// sleep_us (it waits, it burns no CPU), so a worker's rate is its
// parallelism over the cost, whatever the machine's load: a node runs the
// map with the spec's parallelism (--remote-cores), the client's local
// worker with its budget (--local-cpus, a parallelism cap). The training
// loop takes --ingest rows per second at most (it sleeps its step's time
// per batch). Each config runs a fresh job for --seconds, measured from
// its start (auto's profiling included; it remembers no profile).
func benchOffload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("offload", "[--seconds S] [--workers K] [--json]", stderr)
	seconds := fs.Float64("seconds", 6, "how long each config's job is read, from its start")
	workers := fs.Int("workers", 2, "remote workers (nodes)")
	costUs := fs.Int64("cost-us", 2000, "the pipeline's cost per element, sleep-based (µs)")
	remoteCores := fs.Int("remote-cores", 1, "each node's emulated cores: the map's parallelism there")
	localCPUs := fs.Float64("local-cpus", 2, "the client's local budget in the spare-local scenario (cores: the local worker's parallelism)")
	batch := fs.Int64("batch", 10, "rows per batch")
	scenarios := fs.String("scenarios", "spare-local,no-stall,split-cost,slow-link", "comma-separated: spare-local (the loop is faster than the nodes, the host has spare CPUs), no-stall (the host alone keeps up with the loop), split-cost (two cost ops, the second half as dear: the rows include each cut point), slow-link (split-cost's ops, the second making each element --payload-bytes, read over a link of --rate into the client)")
	suffixUs := fs.Int64("suffix-cost-us", 1000, "split-cost and slow-link: the second op's cost per element (µs); the first costs --cost-us")
	rate := fs.Float64("rate", 2e6, "slow-link: the link's rate into the client, bytes/s (emulated on the client's socket; the nodes talk at loopback speed)")
	only := fs.String("configs", "", "comma-separated: run only these configs of each scenario (defaults: no Workers or Offload set, no profile kept; local, remote, fraction=F, cut=N, auto, auto-repeat: slow-link only, auto again with auto's profile remembered, so run auto before it); ratio_vs_best is then over those run, defaults left out of the best")
	queue := fs.Float64("queue-bytes", 64<<10, "slow-link: the link's drop-tail queue (bytes): what a small answer may wait behind")
	payload := fs.Int64("payload-bytes", 32<<10, "slow-link: what the second op makes each element weigh (a decode: its output is much larger than its input)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: scenario, config (local, remote, fraction=F, cut=N, auto), elements_per_second (rows into the training loop), remote_worker_seconds (Σ over the nodes that delivered to the reader of the seconds from their first batch to the end), local_share (of the batches), ratio_vs_best, ratio_vs_remote, decision (auto's mode and reason)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if !(*rate > 0) || !(*queue >= 1500) || *payload < 1 || *payload > fn.MaxCostOutBytes {
		return fmt.Errorf("--rate %v, --queue-bytes %v, --payload-bytes %d: want a rate > 0, a queue of at least a datagram (1500) and 1 to %d bytes", *rate, *queue, *payload, fn.MaxCostOutBytes)
	}
	c, cleanup, err := jobsCluster(ctx, *workers)
	if err != nil {
		return err
	}
	defer cleanup()
	fast := transport.FastConfig()
	copts := client.Options{Transport: &fast, HeartbeatInterval: 200 * time.Millisecond, PrefetchBatches: 32, OffloadProfiles: "off",
		// The scenarios emulate nodes with CPUs of their own (sleep costs):
		// auto decides by measurement, as for nodes elsewhere.
		OffloadColocation: client.OffloadColocationIgnore}
	cl, err := client.Dial(ctx, c.Node(0).Addr(), copts)
	if err != nil {
		return err
	}
	defer cl.Close()
	var slowCl, slowDefaultsCl *client.Client // the slow-link scenario's, dialed when it runs
	nodeRate := float64(*remoteCores) * 1e6 / float64(*costUs)
	type scenario struct {
		name    string
		ingest  float64 // rows/s the loop takes at most
		local   float64 // the local budget
		ops     []int64 // each op's cost (µs, sleep-based)
		configs []string
		// outBytes, when > 0, makes the last op's output weigh that
		// much, and the scenario reads over the emulated slow link.
		outBytes int64
	}
	// defaults is the job with neither Workers nor Offload set (and the
	// scenario's emulated host budget as its LocalCPUs, what an idle host
	// of that size measures), read by a client that keeps no profile: what
	// a user gets without a flag. It runs first, as a first job.
	configs := []string{"defaults", "local", "remote"}
	for f := 1; f <= 9; f++ {
		configs = append(configs, fmt.Sprintf("fraction=0.%d", f))
	}
	configs = append(configs, "auto")
	var scs []scenario
	for _, s := range strings.Split(*scenarios, ",") {
		switch strings.TrimSpace(s) {
		case "spare-local":
			// The loop could take 4× what the nodes make; the host has
			// a budget worth as much as the nodes together.
			scs = append(scs, scenario{name: "spare-local", ingest: 4 * nodeRate * float64(*workers), local: *localCPUs, ops: []int64{*costUs}, configs: configs})
		case "no-stall":
			// The loop takes half of what the host alone makes.
			scs = append(scs, scenario{name: "no-stall", ingest: 0.5 * *localCPUs * 1e6 / float64(*costUs), local: *localCPUs, ops: []int64{*costUs}, configs: configs})
		case "split-cost":
			// Two ops; a cut after the first leaves the second to the
			// client (at the spec's parallelism, --remote-cores), beside
			// the nodes running the first. The loop takes all it gets.
			cfgs := []string{"defaults", "local", "remote", "fraction=0.5", "cut=1", "cut=2", "auto"}
			scs = append(scs, scenario{name: "split-cost", ingest: 4 * nodeRate * float64(*workers), local: *localCPUs, ops: []int64{*costUs, *suffixUs}, configs: cfgs})
		case "slow-link":
			// split-cost's ops, the second a decode that makes each
			// element --payload-bytes: whole elements crossing the slow
			// link are bounded by --rate / --payload-bytes, while a cut
			// after the first op ships them small and decodes on the
			// host. Every fraction and every cut point.
			// auto-repeat is auto again, the host now remembering the
			// pipeline's profile from auto's job (as FastFlow profiles
			// before it decides): it may choose a cut.
			cfgs := append(append([]string(nil), configs[:len(configs)-1]...), "cut=1", "cut=2", "auto", "auto-repeat")
			scs = append(scs, scenario{name: "slow-link", ingest: 4 * nodeRate * float64(*workers), local: *localCPUs, ops: []int64{*costUs, *suffixUs}, configs: cfgs, outBytes: *payload})
		default:
			return fmt.Errorf("--scenarios: %q: want spare-local, no-stall, split-cost or slow-link", s)
		}
	}
	window := time.Duration(*seconds * float64(time.Second))
	var rows []benchRow
	n := 0
	for _, sc := range scs {
		var scRows []benchRow
		best, remote := 0.0, 0.0
		for _, cfg := range sc.configs {
			if *only != "" && !slices.Contains(cli.SplitList(*only), cfg) {
				continue
			}
			n++
			spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1 << 24, SplitSize: 20}})
			for i, us := range sc.ops {
				args := fn.Args{"sleep_us": us}
				if sc.outBytes > 0 && i == len(sc.ops)-1 {
					args["out_bytes"] = sc.outBytes
				}
				spec.Map("cost", args, *remoteCores)
			}
			spec.Batch(*batch, false)
			o := client.JobOptions{Name: fmt.Sprintf("offload-%s-%s-%d", sc.name, cfg, n), Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: cfg, LocalCPUs: sc.local, GCAfter: time.Second}
			switch cfg {
			case "auto-repeat":
				o.Offload = client.OffloadAuto
			case "defaults":
				o.Workers, o.Offload = "", ""
			}
			if c, ok := strings.CutPrefix(cfg, "cut="); ok {
				cut, err := strconv.Atoi(c)
				if err != nil {
					return fmt.Errorf("config %s: %w", cfg, err)
				}
				o.Offload, o.OffloadBoundary = client.OffloadRemote, cut
			}
			rcl := cl
			link := ""
			if sc.outBytes > 0 && cfg == "defaults" {
				if slowDefaultsCl == nil {
					udp, err := net.ListenUDP("udp", &net.UDPAddr{})
					if err != nil {
						return err
					}
					so := copts
					so.PacketConn = slowlink.New(udp, *rate, *queue)
					so.OffloadProfiles = ""
					if slowDefaultsCl, err = client.Dial(ctx, c.Node(0).Addr(), so); err != nil {
						return err
					}
					defer slowDefaultsCl.Close()
				}
				rcl = slowDefaultsCl
				link = fmt.Sprintf(", a link of %.3g MB/s, %d-byte elements", *rate/1e6, sc.outBytes)
			} else if sc.outBytes > 0 {
				if slowCl == nil {
					udp, err := net.ListenUDP("udp", &net.UDPAddr{})
					if err != nil {
						return err
					}
					so := copts
					so.PacketConn = slowlink.New(udp, *rate, *queue)
					// Its auto jobs remember their profiles (auto-repeat
					// reads auto's), in a file of this run only.
					dir, err := os.MkdirTemp("", "feedmesh-bench-profiles-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(dir)
					so.OffloadProfiles = filepath.Join(dir, "offload-profiles.json")
					if slowCl, err = client.Dial(ctx, c.Node(0).Addr(), so); err != nil {
						return err
					}
					defer slowCl.Close()
				}
				rcl = slowCl
				link = fmt.Sprintf(", a link of %.3g MB/s, %d-byte elements", *rate/1e6, sc.outBytes)
			}
			fmt.Fprintf(stderr, "%s %s: ingest %.0f rows/s, local budget %.2g, %d nodes of %d cores, op costs %v µs%s …\n", sc.name, cfg, sc.ingest, sc.local, *workers, *remoteCores, sc.ops, link)
			r, err := offloadRun(ctx, rcl, spec, o, sc.ingest, *batch, window)
			if err != nil {
				return fmt.Errorf("%s %s: %w", sc.name, cfg, err)
			}
			row := benchRow{"scenario": sc.name, "config": cfg, "elements_per_second": r.rate, "remote_worker_seconds": r.remoteSeconds,
				"local_share": r.localShare, "decision": r.decision}
			if cfg != "defaults" {
				best = max(best, r.rate)
			}
			if cfg == "remote" {
				remote = r.rate
			}
			scRows = append(scRows, row)
		}
		for _, row := range scRows {
			row["ratio_vs_best"] = row["elements_per_second"].(float64) / best
			if remote > 0 {
				row["ratio_vs_remote"] = row["elements_per_second"].(float64) / remote
			}
		}
		rows = append(rows, scRows...)
	}
	return printRows(stdout, *jsonOut, []string{"scenario", "config", "elements_per_second", "remote_worker_seconds", "local_share", "ratio_vs_best", "ratio_vs_remote", "decision"}, rows)
}

type offloadResult struct {
	rate, remoteSeconds, localShare float64
	decision                        string
}

// offloadRun reads one job for window as a loop that takes at most ingest
// rows per second, and measures.
func offloadRun(ctx context.Context, cl *client.Client, spec *pipeline.Spec, o client.JobOptions, ingest float64, batch int64, window time.Duration) (offloadResult, error) {
	start := time.Now()
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		return offloadResult{}, err
	}
	defer it.Close()
	step := time.Duration(float64(batch) / ingest * float64(time.Second))
	rctx, cancel := context.WithDeadline(ctx, start.Add(window))
	defer cancel()
	var rows int64
	remoteSince := map[string]time.Time{}
	var remoteSeconds float64
	lastCheck := time.Time{}
	for {
		b, err := it.Next(rctx)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return offloadResult{}, err
		}
		rows += b.Rows()
		b.Release()
		time.Sleep(step) // the training step
		if time.Since(lastCheck) > 200*time.Millisecond {
			lastCheck = time.Now()
			noteRemote(it.Stats().Workers, remoteSince, lastCheck)
		}
	}
	el := time.Since(start)
	now := time.Now()
	noteRemote(it.Stats().Workers, remoteSince, now)
	for _, since := range remoteSince {
		remoteSeconds += now.Sub(since).Seconds()
	}
	r := offloadResult{rate: float64(rows) / el.Seconds(), remoteSeconds: remoteSeconds}
	if st := it.Stats().Offload; st != nil {
		r.localShare = st.LocalShare
		r.decision = st.Mode
		if st.Cut > 0 {
			r.decision = fmt.Sprintf("%s, cut=%d", st.Mode, st.Cut)
		}
		if o.Offload == "auto" || o.Offload == "" {
			r.decision = st.Mode + ": " + st.Reason
			if st.FromCache {
				r.decision += " (from the remembered profile)"
			}
		}
	}
	return r, nil
}

// noteRemote records when each node was first seen to deliver to this
// reader (a worker-second is counted from then to the end of the run: the
// node works for the job from then on). A node assigned the job but held
// off (offload local) delivers nothing and is not counted.
func noteRemote(ws map[string]client.WorkerStats, since map[string]time.Time, now time.Time) {
	for name, w := range ws {
		if _, local := jobspec.LocalWorkerOf(name); local || w.Batches == 0 {
			continue
		}
		if _, ok := since[name]; !ok {
			since[name] = now
		}
	}
}
