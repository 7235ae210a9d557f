package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

func init() {
	register(command{name: "demo", summary: "run an in-process cluster and show what feedmesh does", run: runDemo})
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "[--nodes N]", stderr)
	nodes := fs.Int("nodes", 3, "number of in-process nodes")
	keep := fs.Bool("keep", false, "keep the nodes' data dir instead of deleting it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 32 {
		return fmt.Errorf("--nodes %d: want 1 to 32", *nodes)
	}
	dir, err := os.MkdirTemp("", "feedmesh-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}

	step := stepPrinter(stdout)
	step("starting %d nodes on loopback (data in %s)", *nodes, dir)
	start := time.Now()
	c, err := testcluster.New(dir, *nodes)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	li, leader := c.Leader()
	step("cluster formed in %s: leader %s", time.Since(start).Round(time.Millisecond), c.Name(li))
	printMembers(stdout, leader.Members())

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	idx, err := c.Node((li+1)%*nodes).Put(wctx, "demo/greeting", []byte("hello from feedmesh"))
	cancel()
	if err != nil {
		return fmt.Errorf("write through a follower: %w", err)
	}
	step("wrote demo/greeting through follower %s (forwarded to the leader, log index %d)", c.Name((li+1)%*nodes), idx)

	if *nodes < 3 {
		step("fewer than 3 nodes: skipping the failover part")
		return nil
	}
	step("killing the leader %s (no leave message, like SIGKILL)", c.Name(li))
	killed := time.Now()
	c.Kill(li)
	var newLeader *mesh.Node
	if err := c.Wait(10*time.Second, "a new leader", func() bool {
		_, newLeader = c.Leader()
		return newLeader != nil
	}); err != nil {
		return err
	}
	step("new leader %s elected %s after the kill", newLeader.Name(), time.Since(killed).Round(time.Millisecond))
	if err := c.Wait(10*time.Second, "the kill to be gossiped", func() bool {
		for _, m := range newLeader.Members() {
			if m.Name == c.Name(li) && m.Status == mesh.StatusDead {
				return true
			}
		}
		return false
	}); err != nil {
		return err
	}
	step("gossip declared %s dead %s after the kill", c.Name(li), time.Since(killed).Round(time.Millisecond))
	printMembers(stdout, newLeader.Members())

	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	v, ok, err := newLeader.Get(rctx, "demo/greeting", false)
	cancel()
	if err != nil || !ok {
		return fmt.Errorf("read after failover: found=%v err=%v", ok, err)
	}
	step("read demo/greeting after failover: %q", v)
	step("done; try a real cluster next (see README.md)")
	return nil
}

func stepPrinter(w io.Writer) func(format string, args ...any) {
	t0 := time.Now()
	return func(format string, args ...any) {
		fmt.Fprintf(w, "[%6.2fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
}

func printMembers(w io.Writer, ms []mesh.Member) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "          NAME\tSTATUS\tRAFT\tADDR")
	for _, m := range ms {
		fmt.Fprintf(tw, "          %s\t%s\t%s\t%s\n", m.Name, m.Status, m.Raft, m.Addr)
	}
	tw.Flush()
}
