package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	registerBench(cli.Command{Name: "scale", Summary: "the cost model: formation, join convergence, Raft commands/s by type, leader CPU, gossip bytes/s, control RPCs/s at the leader, p99 control round trip, per cluster size N", Run: benchScale})
}

// scaleRow is one row of `feedmesh-bench scale`: one cluster size, one
// gossip timing, in steady state with one DYNAMIC job over all nodes.
type scaleRow struct {
	Nodes     int    `json:"nodes"`
	Consumers int    `json:"consumers"`
	Gossip    string `json:"gossip"` // fast (mesh.FastConfig) or scaled (localcluster.ScaledGossip)
	// FormS: New(N) until every node sees N alive and one leader;
	// JoinS: one more node joins until all N+1 see N+1 alive.
	FormS float64 `json:"form_s"`
	JoinS float64 `json:"join_converge_s"`
	// JobStartS: the first consumer's Distribute (the job created, a task
	// assigned to every node), then until every consumer has read.
	JobStartS float64 `json:"job_start_s"`
	FirstS    float64 `json:"all_consumers_reading_s"`
	// Over the window: rows/s the consumers read, the Raft commands the
	// leader applied per second by type and in all, the control requests
	// the leader served per second by method and in all.
	RowsPerS    float64            `json:"rows_per_s"`
	RaftPerS    float64            `json:"raft_cmds_per_s"`
	RaftByType  map[string]float64 `json:"raft_cmds_per_s_by_type"`
	RPCPerS     float64            `json:"leader_rpcs_per_s"`
	RPCByMethod map[string]float64 `json:"leader_rpcs_per_s_by_method"`
	// CPU-seconds per second from a CPU profile of the window split by
	// the nodes' goroutine labels: the leader's, the mean of the others
	// (each also a worker of the job), and the whole process's (rusage).
	LeaderCPU   float64 `json:"leader_cpu_s_per_s"`
	FollowerCPU float64 `json:"follower_cpu_s_per_s"`
	ProcessCPU  float64 `json:"process_cpu_s_per_s"`
	// Gossip sent by all nodes together, per second: UDP packets and
	// their bytes, TCP stream bytes (push/pull).
	GossipPktPerS    float64 `json:"gossip_packets_per_s"`
	GossipBytesPerS  float64 `json:"gossip_bytes_per_s"`
	GossipStreamBPS  float64 `json:"gossip_stream_bytes_per_s"`
	RTTP50MS         float64 `json:"control_rtt_p50_ms"`
	RTTP99MS         float64 `json:"control_rtt_p99_ms"`
	LeaderChanged    bool    `json:"leader_changed"`
	WindowS          float64 `json:"window_s"`
	ConsumerBatchesS float64 `json:"consumer_batches_per_s_each"`
}

func benchScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("scale", "[--nodes 3,10,30] [--consumers C] [--gossip fast,scaled] [--seconds S] [--json]", stderr)
	nodesFlag := fs.String("nodes", "3,10,30", "cluster sizes N to measure, smallest first")
	consumersFlag := fs.String("consumers", "8", "consumer counts C of the one DYNAMIC job to measure for each N (each consumer its own client, dialling node k mod N)")
	rate := fs.Float64("rate", 20, "batches/s each consumer reads (of 256 rows): a fixed data rate whatever N, so that what grows with N is the control plane")
	gossip := fs.String("gossip", "default", "the nodes' timing: default (mesh.DefaultConfig's gossip, Raft, reconcile and worker polls: production rates, for the cost model), fast (mesh.FastConfig as is, each node joining every running node, as localcluster did before), scaled (FastConfig with localcluster.ScaledGossip: its gossip intervals × max(1, N/10) up to memberlist's LAN timing, joining at most 6 nodes), or a list: each in turn for each N")
	seconds := fs.Float64("seconds", 10, "steady-state window per size, after 3 s of warm-up")
	rtts := fs.Float64("rtt-rate", 20, "control round trips per second (a consistent Get through a follower, forwarded to the leader) timed during the window")
	startTimeout := fs.Duration("start-timeout", 3*time.Minute, "how long a cluster may take to form")
	formOnly := fs.Bool("form-only", false, "measure only formation (N nodes until each sees N alive and one leader) and a join (one node more until all see it), no job: each row's form_s and join_s")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows (see scaleRow in cmd/feedmesh-bench/scale.go)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var sizes []int
	for _, s := range cli.SplitList(*nodesFlag) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			return cli.InputError(fmt.Errorf("--nodes: %q is not a size of at least 3", s))
		}
		sizes = append(sizes, n)
	}
	modes := cli.SplitList(*gossip)
	for _, m := range modes {
		if m != "fast" && m != "scaled" && m != "default" {
			return cli.InputError(fmt.Errorf("--gossip: unknown timing %q (want default, fast or scaled)", m))
		}
	}
	var counts []int
	for _, s := range cli.SplitList(*consumersFlag) {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 {
			return cli.InputError(fmt.Errorf("--consumers: %q is not a positive count", s))
		}
		counts = append(counts, k)
	}
	if *rate <= 0 || *seconds <= 0 || *rtts <= 0 {
		return cli.InputError(fmt.Errorf("--rate, --seconds and --rtt-rate must be positive"))
	}
	var rows []scaleRow
	for _, n := range sizes {
		for _, m := range modes {
			for _, consumers := range counts {
				fmt.Fprintf(stderr, "scale: N=%d, %d consumers, gossip %s …\n", n, consumers, m)
				r, err := scaleRun(ctx, n, consumers, m, *rate, *rtts, time.Duration(*seconds*float64(time.Second)), *startTimeout, *formOnly, stderr)
				if err != nil {
					return fmt.Errorf("N=%d, gossip %s: %w", n, m, err)
				}
				rows = append(rows, r)
				if *formOnly {
					fmt.Fprintf(stderr, "  form %.1f s, join %.2f s\n", r.FormS, r.JoinS)
					break // consumers do not matter without a job
				}
				fmt.Fprintf(stderr, "  form %.1f s, join %.2f s, job start %.2f s (all reading %.2f s), %.0f rows/s, raft %.1f cmds/s (%s), leader rpcs %.1f/s (%s), CPU leader %.3f follower %.3f process %.2f s/s, gossip %.0f pkts/s %.0f B/s + streams %.0f B/s, rtt p50 %.1f p99 %.1f ms%s\n",
					r.FormS, r.JoinS, r.JobStartS, r.FirstS, r.RowsPerS, r.RaftPerS, fmtRates(r.RaftByType), r.RPCPerS, fmtRates(r.RPCByMethod), r.LeaderCPU, r.FollowerCPU, r.ProcessCPU,
					r.GossipPktPerS, r.GossipBytesPerS, r.GossipStreamBPS, r.RTTP50MS, r.RTTP99MS, map[bool]string{true: " (leader changed)"}[r.LeaderChanged])
			}
		}
	}
	if *jsonOut {
		return cli.WriteJSON(stdout, rows)
	}
	var out []benchRow
	for _, r := range rows {
		out = append(out, benchRow{"nodes": r.Nodes, "consumers": r.Consumers, "gossip": r.Gossip, "form_s": r.FormS, "join_s": r.JoinS, "job_start_s": r.JobStartS,
			"raft_cmds_per_s": r.RaftPerS, "leader_rpcs_per_s": r.RPCPerS, "leader_cpu": r.LeaderCPU, "follower_cpu": r.FollowerCPU,
			"gossip_kB_per_s": (r.GossipBytesPerS + r.GossipStreamBPS) / 1000, "rtt_p99_ms": r.RTTP99MS})
	}
	return printRows(stdout, false, []string{"nodes", "consumers", "gossip", "form_s", "join_s", "job_start_s", "raft_cmds_per_s", "leader_rpcs_per_s", "leader_cpu", "follower_cpu", "gossip_kB_per_s", "rtt_p99_ms"}, out)
}

func scaleRun(ctx context.Context, n, consumers int, gossip string, rate, rttRate float64, window, startTimeout time.Duration, formOnly bool, stderr io.Writer) (scaleRow, error) {
	row := scaleRow{Nodes: n, Consumers: consumers, Gossip: gossip, ConsumerBatchesS: rate}
	dir, err := os.MkdirTemp("", "feedmesh-bench-scale-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(dir)
	// Raft with its production timing (1 s heartbeat and election
	// timeouts) in every mode: FastConfig's 100 ms lose the leader under
	// the load of tens of in-process nodes on 2 cores, and an election
	// mid-window measures the election.
	opts := []localcluster.Option{localcluster.WithContext(ctx), localcluster.WithStartTimeout(startTimeout),
		localcluster.WithConfig(func(_ int, c *mesh.Config) { c.Raft = raftnode.DefaultConfig() })}
	switch gossip {
	case "scaled":
		opts = append(opts, localcluster.WithScaledGossip())
	case "fast":
		opts = append(opts, localcluster.WithJoinAll())
	case "default":
		opts = append(opts, localcluster.WithConfig(func(_ int, c *mesh.Config) {
			d := mesh.DefaultConfig()
			c.Gossip, c.Transport, c.VoterGrace, c.ReconcileInterval = d.Gossip, d.Transport, d.VoterGrace, d.ReconcileInterval
			c.Worker.JobPollInterval, c.Worker.OrphanPollInterval = d.Worker.JobPollInterval, d.Worker.OrphanPollInterval
			c.KnownMembersInterval = d.KnownMembersInterval
		}))
	}
	t0 := time.Now()
	c, err := localcluster.New(dir, n, opts...)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return row, err
	}
	row.FormS = time.Since(t0).Seconds()

	// Join convergence: one more node, until all see N+1 alive.
	t0 = time.Now()
	if _, err := c.Add(); err != nil {
		return row, err
	}
	if err := c.Wait(2*time.Minute, "join convergence", func() bool {
		for _, i := range c.Running() {
			if countAlive(c.Node(i).Members()) != n+1 {
				return false
			}
		}
		return true
	}); err != nil {
		return row, err
	}
	row.JoinS = time.Since(t0).Seconds()
	if formOnly {
		return row, nil
	}

	// One DYNAMIC job over all nodes, C consumers reading at a fixed rate.
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1 << 32, SplitSize: 2048}})
	spec.Batch(256, false)
	jctx, stopJob := context.WithCancel(ctx)
	var rowsRead atomic.Int64
	var wg sync.WaitGroup
	var clients []*client.Client
	defer func() {
		stopJob()
		wg.Wait()
		for _, cl := range clients {
			cl.Close()
		}
	}()
	errs := make(chan error, consumers)
	all := c.Running()
	jobStart := time.Now()
	for k := 0; k < consumers; k++ {
		node := c.Node(all[k%len(all)])
		cl, err := client.Dial(jctx, node.Addr(), client.Options{HeartbeatInterval: time.Second, RequestTimeout: 30 * time.Second})
		if err != nil {
			return row, err
		}
		clients = append(clients, cl)
		it, err := cl.Distribute(jctx, spec, client.JobOptions{Name: "scale", Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: client.OffloadRemote})
		if err != nil {
			return row, fmt.Errorf("consumer %d: %w", k, err)
		}
		if k == 0 {
			row.JobStartS = time.Since(jobStart).Seconds()
		}
		wg.Go(func() {
			defer it.Close()
			tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
			defer tick.Stop()
			for {
				b, err := it.Next(jctx)
				if err != nil {
					if jctx.Err() == nil {
						errs <- err
					}
					return
				}
				rowsRead.Add(int64(b.Rows()))
				select {
				case <-tick.C:
				case <-jctx.Done():
					return
				}
			}
		})
	}
	// Warm up: every consumer has read, then 3 s more.
	if err := c.Wait(time.Minute, "the consumers' first batches", func() bool { return rowsRead.Load() >= int64(consumers)*256 }); err != nil {
		return row, err
	}
	row.FirstS = time.Since(jobStart).Seconds()
	timer := time.NewTimer(3 * time.Second)
	select {
	case <-timer.C:
	case <-ctx.Done():
		return row, ctx.Err()
	}

	var (
		li     int
		leader *mesh.Node
	)
	if err := c.Wait(30*time.Second, "one leader", func() bool { li, leader = c.Leader(); return leader != nil }); err != nil {
		return row, err
	}
	follower := c.Node(all[(slices.Index(all, li)+1)%len(all)])
	rcl, err := client.Dial(ctx, follower.Addr(), client.Options{RequestTimeout: 30 * time.Second})
	if err != nil {
		return row, err
	}
	defer rcl.Close()
	if _, err := rcl.Put(ctx, "scale-rtt", []byte("x")); err != nil {
		return row, err
	}

	// The window.
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		return row, fmt.Errorf("cpu profile: %w", err)
	}
	cmds0, rpcs0 := leader.Raft().AppliedCommands(), leader.RPCCalls()
	g0 := gossipTotal(c)
	rows0, cpu0, w0 := rowsRead.Load(), processCPU(), time.Now()
	var rtts []time.Duration
	tick := time.NewTicker(time.Duration(float64(time.Second) / rttRate))
	for time.Since(w0) < window {
		select {
		case <-tick.C:
		case <-ctx.Done():
			tick.Stop()
			pprof.StopCPUProfile()
			return row, ctx.Err()
		case err := <-errs:
			tick.Stop()
			pprof.StopCPUProfile()
			return row, fmt.Errorf("consumer: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t := time.Now()
		_, _, err := rcl.Get(rctx, "scale-rtt", false)
		rtts = append(rtts, time.Since(t))
		cancel()
		if err != nil {
			tick.Stop()
			pprof.StopCPUProfile()
			return row, fmt.Errorf("control round trip: %w", err)
		}
	}
	tick.Stop()
	d := time.Since(w0).Seconds()
	row.WindowS = d
	row.RowsPerS = float64(rowsRead.Load()-rows0) / d
	row.ProcessCPU = (processCPU() - cpu0).Seconds() / d
	g1 := gossipTotal(c)
	cmds1, rpcs1 := leader.Raft().AppliedCommands(), leader.RPCCalls()
	pprof.StopCPUProfile()
	if li2, _ := c.Leader(); li2 != li {
		row.LeaderChanged = true
	}
	row.RaftByType, row.RaftPerS = perSecond(cmds0, cmds1, d)
	row.RPCByMethod, row.RPCPerS = perSecond(rpcs0, rpcs1, d)
	row.GossipPktPerS = float64(g1.PacketsSent-g0.PacketsSent) / d
	row.GossipBytesPerS = float64(g1.PacketBytes-g0.PacketBytes) / d
	row.GossipStreamBPS = float64(g1.StreamBytes-g0.StreamBytes) / d
	slices.Sort(rtts)
	row.RTTP50MS = ms(rtts[len(rtts)/2])
	row.RTTP99MS = ms(rtts[min(len(rtts)-1, len(rtts)*99/100)])

	byNode, err := cpuByLabel(prof.Bytes(), "node")
	if err != nil {
		return row, fmt.Errorf("cpu profile: %w", err)
	}
	row.LeaderCPU = byNode[c.Name(li)].Seconds() / d
	var others []float64
	for _, i := range c.Running() {
		if i != li {
			others = append(others, byNode[c.Name(i)].Seconds()/d)
		}
	}
	row.FollowerCPU = median(others)
	stopJob()
	return row, nil
}

func countAlive(ms []api.Member) int {
	k := 0
	for _, m := range ms {
		if m.Status == api.StatusAlive {
			k++
		}
	}
	return k
}

// gossipTotal sums the running nodes' gossip counters.
func gossipTotal(c *localcluster.Cluster) mesh.GossipStats {
	var t mesh.GossipStats
	for _, i := range c.Running() {
		if n := c.Node(i); n != nil {
			g := n.GossipStats()
			t.PacketsSent += g.PacketsSent
			t.PacketBytes += g.PacketBytes
			t.Streams += g.Streams
			t.StreamBytes += g.StreamBytes
		}
	}
	return t
}

// perSecond is each key's increase from a to b per second of d, and
// their sum.
func perSecond(a, b map[string]uint64, d float64) (map[string]float64, float64) {
	out := map[string]float64{}
	var sum float64
	for k, v := range b {
		if v > a[k] {
			r := float64(v-a[k]) / d
			out[k] = r
			sum += r
		}
	}
	return out, sum
}
