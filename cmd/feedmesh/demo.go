package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/mesh/observe"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	register(cli.Command{Name: "demo", Summary: "run an in-process cluster and show what feedmesh does", Run: runDemo})
}

// demoSpec is the built-in dataset: heavy-tailed synthetic text, tokenized
// and bucketed by length into padded batches — an NLP input pipeline.
func demoSpec(elements int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: elements, Seed: 7, SplitSize: 250}))
	s.Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 1)
	s.BucketBySequenceLength(pipeline.BucketOp{
		Tensor: "tokens", Boundaries: []int64{16, 32, 64, 128}, BatchSizes: []int64{64, 32, 16, 8, 4},
	})
	return s
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("demo", "[--nodes N] [--elements N]", stderr)
	nodes := fs.Int("nodes", 3, "number of in-process nodes")
	elements := fs.Int64("elements", 300000, "elements in the built-in text dataset")
	failover := fs.Bool("failover", true, "kill the leader (also a worker) in the middle of the read")
	keep := fs.Bool("keep", false, "keep the nodes' data dir instead of deleting it")
	statusAddr := fs.String("status-addr", "", "serve the entry node's status page and metrics on this host:port while the demo runs (e.g. 127.0.0.1:9947)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 32 {
		return fmt.Errorf("--nodes %d: want 1 to 32", *nodes)
	}
	if *elements < 1 {
		return fmt.Errorf("--elements must be >= 1")
	}
	dir, err := os.MkdirTemp("", "feedmesh-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}

	step := stepPrinter(stdout)
	step("starting %d identical nodes on loopback (gossip + Raft + QUIC; data in %s)", *nodes, dir)
	start := time.Now()
	c, err := localcluster.New(dir, *nodes)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	li, leader, err := waitLeader(c)
	if err != nil {
		return err
	}
	step("cluster formed in %s: leader %s", time.Since(start).Round(time.Millisecond), c.Name(li))
	printMembers(stdout, leader.Members())

	entry := (li + 1) % *nodes
	if *statusAddr != "" {
		srv, err := observe.Listen(*statusAddr, c.Node(entry), observe.Options{})
		if err != nil {
			return fmt.Errorf("--status-addr: %w", err)
		}
		defer srv.Close()
		step("status page of %s: http://%s/ (metrics: http://%s/metrics)", c.Name(entry), srv.Addr(), srv.Addr())
	}
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(entry).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	defer cl.Close()
	spec := demoSpec(*elements)
	step("client dialed %s (any node works) and starts job \"demo\": %d synthetic sentences → tokenize → bucket by length, DYNAMIC sharding, exactly once", c.Name(entry), *elements)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "demo", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		return err
	}
	defer it.Close()

	seen := newIDCounter(*elements)
	killAt := *elements / 3
	killed := !*failover || *nodes < 3
	readStart := time.Now()
	lastPrint := time.Now()
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := seen.add(b); err != nil {
			return err
		}
		b.Release() // only counted: its buffers can take the next batch
		s := it.Stats()
		if time.Since(lastPrint) >= 500*time.Millisecond {
			lastPrint = time.Now()
			el := time.Since(readStart).Seconds()
			step("read %7d batches, %7d sentences (%5.1f%%), %6.0f sentences/s, %5.1f MB/s, from %d workers",
				s.Batches, s.Rows, 100*float64(s.Rows)/float64(*elements), float64(s.Rows)/el, float64(s.Bytes)/1e6/el, len(s.Workers))
		}
		if !killed && s.Rows >= killAt {
			killed = true
			li, _, err := waitLeader(c)
			if err != nil {
				return err
			}
			step("killing the leader %s (it is also a worker) without warning, like SIGKILL", c.Name(li))
			t0 := time.Now()
			c.Kill(li)
			go func(name string) {
				var nl *mesh.Node
				if c.Wait(10*time.Second, "new leader", func() bool { _, nl = c.Leader(); return nl != nil }) == nil {
					step("new leader %s elected %s after the kill; reading goes on from the other workers", nl.Name(), time.Since(t0).Round(time.Millisecond))
				}
			}(c.Name(li))
		}
	}
	s := it.Stats()
	el := time.Since(readStart).Seconds()
	step("job done: %d batches, %d of %d sentences, %.1f MB in %.2f s (%.0f sentences/s); the loop, which does nothing with them, waited for data %.0f %% of the time",
		s.Batches, s.Rows, *elements, float64(s.Bytes)/1e6, el, float64(s.Rows)/el, 100*s.StallFraction)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "          WORKER\tBATCHES\tSENTENCES\tMB\tSENTENCES/s")
	for _, w := range sortedKeys(s.Workers) {
		ws := s.Workers[w]
		fmt.Fprintf(tw, "          %s\t%d\t%d\t%.1f\t%.0f\n", w, ws.Batches, ws.Elements, float64(ws.Bytes)/1e6, float64(ws.Elements)/el)
	}
	tw.Flush()
	missing, twice := seen.result()
	switch {
	case missing == 0 && twice == 0 && s.Exact != nil && s.Exact.Requeued > 0:
		step("every one of the %d sentences delivered exactly once (ids checked): the %d splits the killed leader held were read again by the others, without the sentences it had already delivered", *elements, s.Exact.Requeued)
	case missing == 0 && twice == 0:
		step("every one of the %d sentences delivered exactly once (ids checked)", *elements)
	default:
		return fmt.Errorf("exactly-once broken: %d sentences missing, %d delivered more than once (please report this)", missing, twice)
	}
	step("next: a real cluster, `feedmesh read` and `feedmesh jobs` (see docs/operating/cluster.md)")
	return nil
}

// waitLeader returns the leader once the running nodes agree on one: just
// after an election, or under load, none or two may believe they lead.
func waitLeader(c *localcluster.Cluster) (int, *mesh.Node, error) {
	var li int
	var l *mesh.Node
	err := c.Wait(10*time.Second, "a leader", func() bool { li, l = c.Leader(); return l != nil })
	return li, l, err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// stepPrinter returns a timestamped printer safe to call from several
// goroutines (the failover watcher prints while the reader does).
func stepPrinter(w io.Writer) func(format string, args ...any) {
	t0 := time.Now()
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "[%6.2fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
}

func printMembers(w io.Writer, ms []api.Member) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "          NAME\tSTATUS\tRAFT\tADDR")
	for _, m := range ms {
		fmt.Fprintf(tw, "          %s\t%s\t%s\t%s\n", m.Name, m.Status, m.Raft, m.Addr)
	}
	tw.Flush()
}

// idCounter counts how often each sentence id of the demo's dataset was
// delivered.
type idCounter struct{ n []uint8 }

func newIDCounter(elements int64) *idCounter { return &idCounter{n: make([]uint8, elements)} }

func (c *idCounter) add(b client.Batch) error {
	t, ok := b.Get("id")
	if !ok {
		return fmt.Errorf("demo batch without an id tensor")
	}
	ids, err := t.Int64s()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id < 0 || id >= int64(len(c.n)) {
			return fmt.Errorf("demo batch with sentence id %d, outside the dataset", id)
		}
		if c.n[id] < 255 {
			c.n[id]++
		}
	}
	return nil
}

// result counts the ids never delivered and those delivered more than once.
func (c *idCounter) result() (missing, twice int) {
	for _, k := range c.n {
		switch {
		case k == 0:
			missing++
		case k > 1:
			twice++
		}
	}
	return missing, twice
}
