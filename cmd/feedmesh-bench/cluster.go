package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	registerBench(cli.Command{Name: "cluster", Summary: "formation, failover, failure detection, control round trip, gossip convergence", Run: benchCluster})
}

// clusterRow is one row of `feedmesh-bench cluster --json`.
type clusterRow struct {
	Metric    string    `json:"metric"`
	Preset    string    `json:"preset"`
	TLS       string    `json:"tls"` // dev or mutual
	Nodes     int       `json:"nodes"`
	Runs      int       `json:"runs"`
	MedianMS  float64   `json:"median_ms"`
	SamplesMS []float64 `json:"samples_ms"`
}

func benchCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("cluster", "[--runs N] [--json]", stderr)
	runs := fs.Int("runs", 5, "clusters started per measurement (medians are reported)")
	gossipNodes := fs.Int("gossip-nodes", 20, "cluster size for the gossip convergence measurement (the fast preset with its gossip and per-node timers × max(1, N/10): localcluster.WithScaledGossip)")
	rtts := fs.Int("rtts", 200, "control requests timed per run")
	presets := fs.String("presets", "fast,default", "timing presets to measure failover and failure detection with")
	tlsModes := fs.String("tls", "dev", "the clusters' TLS: dev (self-signed, peers unverified), mutual (a CA, node certificates, a client certificate and a gossip key, as in production), or dev,mutual for both")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: metric, preset, tls, nodes, runs, median_ms, samples_ms")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: feedmesh-bench cluster [flags]\n\nMetrics: form (3 nodes start → leader and full membership everywhere), failover (leader killed → new leader),\ndead_detect (node killed → peers mark it dead), put_via_follower / get_via_follower (control round trip through a\nnon-leader, per request), gossip_converge (one node joins N-1 → all N see N alive).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "feedmesh-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	var rows []clusterRow
	add := func(metric, preset, mode string, nodes int, ds []time.Duration) {
		r := clusterRow{Metric: metric, Preset: preset, TLS: mode, Nodes: nodes, Runs: len(ds), MedianMS: ms(median(ds))}
		for _, d := range ds {
			r.SamplesMS = append(r.SamplesMS, math.Round(ms(d)*100)/100)
		}
		rows = append(rows, r)
		if !*jsonOut {
			fmt.Fprintf(stderr, "  %-18s %-8s %-6s median %8.2f ms  [%s]\n", metric, preset, mode, r.MedianMS, fmtDurations(ds))
		}
	}
	modes := cli.SplitList(*tlsModes)
	secs := make(map[string]*benchTLS, len(modes))
	for _, mode := range modes {
		sec, err := newBenchTLS(mode, dir, max(3, *gossipNodes))
		if err != nil {
			return err
		}
		secs[mode] = sec
	}
	for _, preset := range cli.SplitList(*presets) {
		opt, err := presetOption(preset)
		if err != nil {
			return err
		}
		// The modes take turns run by run, so that the machine's drift
		// falls on both alike.
		type series struct{ form, failover, dead, put, get []time.Duration }
		got := make(map[string]*series, len(modes))
		for r := 0; r < *runs; r++ {
			for _, mode := range modes {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s := got[mode]
				if s == nil {
					s = &series{}
					got[mode] = s
				}
				rdir, _ := os.MkdirTemp(dir, "run-")
				res, err := clusterRun(ctx, rdir, opt, secs[mode], *rtts)
				if err != nil {
					return fmt.Errorf("preset %s, tls %s, run %d: %w", preset, mode, r, err)
				}
				s.form, s.failover, s.dead = append(s.form, res.form), append(s.failover, res.failover), append(s.dead, res.dead)
				s.put, s.get = append(s.put, res.put), append(s.get, res.get)
			}
		}
		for _, mode := range modes {
			s := got[mode]
			add("form", preset, mode, 3, s.form)
			add("failover", preset, mode, 3, s.failover)
			add("dead_detect", preset, mode, 3, s.dead)
			add("put_via_follower", preset, mode, 3, s.put)
			add("get_via_follower", preset, mode, 3, s.get)
		}
	}
	for _, mode := range modes {
		var conv []time.Duration
		for r := 0; r < *runs; r++ {
			rdir, _ := os.MkdirTemp(dir, "gossip-")
			fmt.Fprintf(stderr, "gossip_converge: %d nodes, then one more joins (run %d, tls %s) …\n", *gossipNodes-1, r+1, mode)
			d, err := gossipConvergence(ctx, rdir, *gossipNodes, secs[mode])
			if err != nil {
				return err
			}
			conv = append(conv, d)
		}
		add("gossip_converge", "fast", mode, *gossipNodes, conv)
	}

	if *jsonOut {
		return cli.WriteJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tPRESET\tTLS\tNODES\tRUNS\tMEDIAN ms\tSAMPLES ms")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%v\n", r.Metric, r.Preset, r.TLS, r.Nodes, r.Runs, r.MedianMS, r.SamplesMS)
	}
	return tw.Flush()
}

func presetOption(name string) (localcluster.Option, error) {
	switch name {
	case "fast":
		return localcluster.WithConfig(func(int, *mesh.Config) {}), nil
	case "default":
		return localcluster.WithConfig(func(_ int, c *mesh.Config) {
			d := mesh.DefaultConfig()
			c.Gossip, c.Raft, c.Transport = d.Gossip, d.Raft, d.Transport
			c.VoterGrace, c.ReconcileInterval = d.VoterGrace, d.ReconcileInterval
		}), nil
	}
	return nil, fmt.Errorf("--presets: unknown preset %q (want fast or default)", name)
}

type clusterResult struct{ form, failover, dead, put, get time.Duration }

func clusterRun(ctx context.Context, dir string, opt localcluster.Option, sec *benchTLS, rtts int) (clusterResult, error) {
	var res clusterResult
	start := time.Now()
	c, err := localcluster.New(dir, 3, opt, sec.opt, localcluster.WithContext(ctx))
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return res, err
	}
	res.form = time.Since(start)

	li, _ := c.Leader()
	follower := c.Node((li + 1) % 3)
	cl, err := client.Dial(ctx, follower.Addr(), client.Options{TLS: sec.client})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	var puts, gets []time.Duration
	for i := 0; i < rtts; i++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		_, err := cl.Put(rctx, "bench", []byte("x"))
		puts = append(puts, time.Since(t0))
		t0 = time.Now()
		_, _, gerr := cl.Get(rctx, "bench", true)
		gets = append(gets, time.Since(t0))
		cancel()
		if err != nil || gerr != nil {
			return res, fmt.Errorf("control round trip: put %v, get %v", err, gerr)
		}
	}
	res.put, res.get = median(puts), median(gets)

	killed := time.Now()
	c.Kill(li)
	var gotLeader, gotDead bool
	err = c.Wait(30*time.Second, "failover and failure detection", func() bool {
		if !gotLeader {
			if _, l := c.Leader(); l != nil {
				gotLeader, res.failover = true, time.Since(killed)
			}
		}
		if !gotDead {
			for _, m := range follower.Members() {
				if m.Name == c.Name(li) && m.Status == api.StatusDead {
					gotDead, res.dead = true, time.Since(killed)
				}
			}
		}
		return gotLeader && gotDead
	})
	return res, err
}

// gossipConvergence forms n-1 nodes and times one more joining until all
// n see each other alive. The nodes' gossip and per-node timers scale
// with n (localcluster.WithScaledGossip: the fast preset as it is up to
// 10 nodes): a hundred in-process nodes probing every 100 ms on 2 cores
// kept suspecting and refuting each other and never converged.
func gossipConvergence(ctx context.Context, dir string, n int, sec *benchTLS) (time.Duration, error) {
	c, err := localcluster.New(dir, n-1, localcluster.WithStartTimeout(60*time.Second), localcluster.WithContext(ctx), localcluster.WithScaledGossip(), sec.opt)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := c.Add(); err != nil {
		return 0, err
	}
	err = c.Wait(30*time.Second, "gossip convergence", func() bool {
		for _, i := range c.Running() {
			alive := 0
			for _, m := range c.Node(i).Members() {
				if m.Status == api.StatusAlive {
					alive++
				}
			}
			if alive != n {
				return false
			}
		}
		return true
	})
	return time.Since(start), err
}

// benchTLS is how a run's cluster and client do TLS.
type benchTLS struct {
	opt    localcluster.Option // the nodes' TLS and gossip key
	client *tls.Config
}

// newBenchTLS makes dev TLS, or for mutual a cluster's CA, certificates
// for nodes node-00 … (localcluster's names), a client certificate and a
// gossip key, under dir: a production setup.
func newBenchTLS(mode, dir string, nodes int) (*benchTLS, error) {
	switch mode {
	case "dev":
		c, err := transport.ClientTLS("", "", "")
		if err != nil {
			return nil, err
		}
		return &benchTLS{opt: localcluster.WithConfig(func(int, *mesh.Config) {}), client: c}, nil
	case "mutual":
	default:
		return nil, fmt.Errorf("--tls: unknown mode %q (want dev or mutual)", mode)
	}
	dir, err := os.MkdirTemp(dir, "pki-")
	if err != nil {
		return nil, err
	}
	ca, err := transport.NewCA("bench", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "bench-ca.crt")
	if err := transport.WriteNewFiles(transport.OutputFile{Path: caFile, Data: ca.CertPEM(), Mode: 0o644}); err != nil {
		return nil, err
	}
	issue := func(id transport.Identity) (string, string, error) {
		c, k, err := ca.Issue(id, transport.CertOptions{ValidFor: time.Hour})
		if err != nil {
			return "", "", err
		}
		base := filepath.Join(dir, string(id.Role)+"-"+id.Name)
		return base + ".crt", base + ".key", transport.WriteNewFiles(
			transport.OutputFile{Path: base + ".crt", Data: c, Mode: 0o644},
			transport.OutputFile{Path: base + ".key", Data: k, Mode: 0o600})
	}
	for i := 0; i < nodes; i++ {
		if _, _, err := issue(transport.Identity{Role: transport.RoleNode, Name: fmt.Sprintf("node-%02d", i)}); err != nil {
			return nil, err
		}
	}
	cc, ck, err := issue(transport.Identity{Role: transport.RoleClient, Name: "bench"})
	if err != nil {
		return nil, err
	}
	client, err := transport.ClientTLS(caFile, cc, ck)
	if err != nil {
		return nil, err
	}
	gossipKey := make([]byte, 32)
	if _, err := rand.Read(gossipKey); err != nil {
		return nil, err
	}
	return &benchTLS{client: client, opt: localcluster.WithConfig(func(_ int, c *mesh.Config) {
		c.TLSCA = caFile
		c.TLSCert = filepath.Join(dir, "node-"+c.Name+".crt")
		c.TLSKey = filepath.Join(dir, "node-"+c.Name+".key")
		c.GossipKey = gossipKey
	})}, nil
}
