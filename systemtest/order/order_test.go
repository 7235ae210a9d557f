package order

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// The dataset: ids 0..n-1, each costing costUs on a worker (so that
// several workers take part), batches of batchSize, blocks of block ids
// in windows of window blocks (windows of 64 ids: 24 windows), epochs
// epochs, seed seed.
const (
	n         = 1500
	costUs    = 300
	batchSize = 8
	block     = 16
	window    = 4
	epochs    = 2
	seed      = 1234
	// reorderBound is ReorderBatches: 64 batches, half of them 4 windows,
	// so that the gate holds streams back; killBound is the kill's: room
	// for what the other workers make while the dead node expires.
	reorderBound = 64
	killBound    = 1024
)

func spec() *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 100}})
	s.Cost(costUs, 0)
	s.Batch(batchSize, false)
	s.OrderBlock, s.OrderWindow = block, window
	return s
}

func options(name string, bound int) client.JobOptions {
	return client.JobOptions{Name: name, Sharding: jobspec.Dynamic, Epochs: epochs,
		Order: jobspec.ValDeterministic, Seed: seed, ReorderBatches: bound}
}

// reference is the sequence the layout alone says: per batch, its ids.
func reference(t *testing.T) [][]int64 {
	s := spec()
	s.Order, s.Seed = pipeline.OrderDeterministic, seed
	plan, ok, err := pipeline.OrderOf(s)
	if err != nil || !ok {
		t.Fatalf("order plan: %v %v", ok, err)
	}
	var out [][]int64
	for e := range int64(epochs) {
		l, err := plan.Layout(e)
		if err != nil {
			t.Fatal(err)
		}
		for w := range l.Windows() {
			ids, err := l.Window(w)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < len(ids); k += batchSize {
				var b []int64
				for _, id := range ids[k:min(k+batchSize, len(ids))] {
					b = append(b, int64(id))
				}
				out = append(out, b)
			}
		}
	}
	return out
}

func dial(t *testing.T, c *testcluster.Cluster) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond,
		OffloadProfiles: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// run is what a consumer received: each batch's ids, its bytes'
// digest, and the workers that made them.
type run struct {
	ids     [][]int64
	digests [][32]byte
	workers map[string]int
}

// read takes up to max batches (max < 0: to the end) from it, calling
// each after every batch.
func read(t *testing.T, it *client.Iterator, r *run, max int, each func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if r.workers == nil {
		r.workers = map[string]int{}
	}
	for got := 0; max < 0 || got < max; got++ {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) && max < 0 {
			return
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", len(r.ids), err)
		}
		vs, dg, err := batchOf(b)
		if err != nil {
			t.Fatal(err)
		}
		r.ids = append(r.ids, vs)
		r.digests = append(r.digests, dg)
		r.workers[b.Worker]++
		if each != nil {
			each()
		}
	}
}

// batchOf is b's ids and the digest of its bytes.
func batchOf(b client.Batch) ([]int64, [32]byte, error) {
	tv, ok := b.Get("value")
	if !ok {
		return nil, [32]byte{}, errors.New("a batch without its ids")
	}
	vs, err := tv.Int64s()
	if err != nil {
		return nil, [32]byte{}, err
	}
	h := sha256.New()
	for _, x := range b.Tensors {
		fmt.Fprintf(h, "%s %v %v ", x.Name, x.DType, x.Shape)
		binary.Write(h, binary.LittleEndian, int64(len(x.Data)))
		h.Write(x.Data)
	}
	return vs, [32]byte(h.Sum(nil)), nil
}

// same fails unless got's batches from the from-th on are want's.
func same(t *testing.T, what string, got, want [][]int64, from int) {
	t.Helper()
	if len(got)+from != len(want) {
		t.Fatalf("%s: %d batches from %d, want %d", what, len(got), from, len(want)-from)
	}
	for i, b := range got {
		w := want[from+i]
		if fmt.Sprint(b) != fmt.Sprint(w) {
			t.Fatalf("%s: batch %d is %v, want %v", what, from+i, b, w)
		}
	}
}

// audited fails unless its visitation audit shows every epoch complete,
// its digest the layout's.
func audited(t *testing.T, it *client.Iterator) {
	t.Helper()
	a := it.Audit()
	if len(a) != epochs {
		t.Fatalf("audit of %d epochs, want %d: %+v", len(a), epochs, a)
	}
	for _, e := range a {
		if !e.Complete || !e.Match || e.Elements != n {
			t.Fatalf("audit of epoch %d: %+v", e.Epoch, e)
		}
	}
}

// TestSameSequenceOn1_2_5Nodes: the same job on 1, 2 and 5 nodes
// delivers the layout's sequence, its batches byte for byte the same
// in every run, made by several workers where there are several.
func TestSameSequenceOn1_2_5Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("three clusters")
	}
	want := reference(t)
	var first *run
	for _, nodes := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("%dnodes", nodes), func(t *testing.T) {
			c := testcluster.Start(t, nodes)
			cl := dial(t, c)
			it, err := cl.Distribute(context.Background(), spec(), options("det", reorderBound))
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			r := &run{}
			read(t, it, r, -1, nil)
			same(t, fmt.Sprintf("%d nodes", nodes), r.ids, want, 0)
			audited(t, it)
			st := it.Stats()
			t.Logf("%d nodes: %d batches from workers %v; reorder %+v", nodes, len(r.ids), r.workers, *st.Reorder)
			if nodes > 1 && len(r.workers) < 2 {
				t.Errorf("%d nodes: one worker made every batch (%v): the test shows nothing of reordering", nodes, r.workers)
			}
			if st.Reorder.Peak > st.Reorder.Bound {
				t.Errorf("reorder peak %d over its bound %d", st.Reorder.Peak, st.Reorder.Bound)
			}
			if first == nil {
				first = r
				return
			}
			for i := range r.digests {
				if !bytes.Equal(r.digests[i][:], first.digests[i][:]) {
					t.Fatalf("batch %d's bytes differ from the 1-node run's", i)
				}
			}
		})
		if t.Failed() {
			return
		}
	}
}

// TestSameSequenceThroughKill: a worker killed in the middle of a window
// (not the node the client dialed, nor the leader) changes nothing of
// the sequence: the rest of its window, made again by another worker
// without the batches that had arrived, is the same batches.
func TestSameSequenceThroughKill(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster and a kill")
	}
	want := reference(t)
	c := testcluster.Start(t, 3)
	cl := dial(t, c)
	it, err := cl.Distribute(context.Background(), spec(), options("det-kill", killBound))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	r := &run{}
	killed := -1
	read(t, it, r, -1, func() {
		if killed >= 0 || len(r.ids) < 30 {
			return
		}
		l, _ := c.WaitLeader(t, 10*time.Second)
		// A worker in the middle of a window: the rest of it is made
		// again by another, without the batches that arrived.
		for _, i := range []int{1, 2} {
			if k := r.workers[c.Name(i)]; i != l && k%(block*window/batchSize) != 0 {
				killed = i
			}
		}
		if killed < 0 {
			return // try after the next batch
		}
		t.Logf("killing %s after %d batches (workers %v)", c.Name(killed), len(r.ids), r.workers)
		c.Kill(killed)
	})
	if killed < 0 {
		t.Fatalf("no worker to kill took part (workers %v)", r.workers)
	}
	same(t, "through a kill", r.ids, want, 0)
	audited(t, it)
	st := it.Stats()
	t.Logf("%d batches from workers %v; reorder %+v; duplicates dropped %d; exactly-once %+v", len(r.ids), r.workers, *st.Reorder, st.DuplicatesDropped, st.Exact)
	if st.Exact == nil || st.Exact.Requeued == 0 {
		t.Errorf("no window was leased again after the kill (%+v): the test shows nothing of a window made again", st.Exact)
	}
}

// TestResumeOnAnotherSize: a checkpoint taken on 2 nodes mid-epoch and
// resumed on a 3-node cluster continues the sequence exactly: the
// batches after the resume point are the uninterrupted run's.
func TestResumeOnAnotherSize(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters")
	}
	want := reference(t)
	const at = 57 // batches before the checkpoint: inside a window
	var ck []byte
	before := &run{}
	{
		c := testcluster.Start(t, 2)
		cl := dial(t, c)
		it, err := cl.Distribute(context.Background(), spec(), options("det-resume", reorderBound))
		if err != nil {
			t.Fatal(err)
		}
		read(t, it, before, at, nil)
		if ck, err = it.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		cl.Close()
		c.Close()
	}
	same(t, "before the checkpoint", before.ids, want[:at], 0)
	t.Logf("checkpoint after %d batches: %d bytes", at, len(ck))
	if len(ck) >= 1024 {
		t.Errorf("checkpoint of %d bytes: a deterministic job's is a position, under 1 KB", len(ck))
	}
	c := testcluster.Start(t, 3)
	cl := dial(t, c)
	o := options("det-resume", reorderBound)
	o.Resume = ck
	it, err := cl.Distribute(context.Background(), spec(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	after := &run{}
	read(t, it, after, -1, nil)
	same(t, "after the resume", after.ids, want, at)
	audited(t, it) // the digest of the part before the checkpoint came with it
	t.Logf("resumed on 3 nodes: %d batches from workers %v", len(after.ids), after.workers)
}

// TestSkipBatches: skipped ranges of the run's sequence (one across the
// epochs' boundary) are passed over and nothing else is, through a
// checkpoint on 2 nodes resumed on 1 without naming them again; the
// audit leaves them out and matches.
func TestSkipBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters")
	}
	ref := reference(t)
	perEpoch := len(ref) / epochs
	skips := [][2]int64{{10, 20}, {int64(perEpoch) - 3, int64(perEpoch) + 5}}
	var want [][]int64
	for i, b := range ref {
		in := false
		for _, s := range skips {
			in = in || int64(i) >= s[0] && int64(i) < s[1]
		}
		if !in {
			want = append(want, b)
		}
	}
	const at = 25 // kept batches before the checkpoint
	o := options("det-skip", reorderBound)
	o.SkipBatches = skips
	before := &run{}
	var ck []byte
	{
		c := testcluster.Start(t, 2)
		cl := dial(t, c)
		it, err := cl.Distribute(context.Background(), spec(), o)
		if err != nil {
			t.Fatal(err)
		}
		read(t, it, before, at, nil)
		if ck, err = it.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		cl.Close()
		c.Close()
	}
	same(t, "before the checkpoint", before.ids, want[:at], 0)
	c := testcluster.Start(t, 1)
	cl := dial(t, c)
	o.SkipBatches, o.Resume = nil, ck // the checkpoint's skips
	it, err := cl.Distribute(context.Background(), spec(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	after := &run{}
	read(t, it, after, -1, nil)
	same(t, "after the resume", after.ids, want, at)
	st := it.Stats()
	t.Logf("%d+%d batches; reorder %+v", len(before.ids), len(after.ids), *st.Reorder)
	for _, a := range it.Audit() {
		if !a.Complete || !a.Match {
			t.Errorf("audit of epoch %d: %+v", a.Epoch, a)
		}
	}
}

// TestRefusals: what deterministic order does not serve yet is refused
// at Distribute, before the job exists, naming the option or op.
func TestRefusals(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := dial(t, c)
	filtered := spec()
	filtered.Ops = append([]pipeline.Op{{Filter: &pipeline.FilterOp{Fn: "length_between", Args: map[string]any{"tensor": "value", "max": 1}}}}, filtered.Ops...)
	files := pipeline.NewSpec(pipeline.Source{Files: &pipeline.FilesSource{Paths: []string{t.TempDir() + "/*.txt"}, Format: "lines"}})
	for _, tc := range []struct {
		spec *pipeline.Spec
		edit func(*client.JobOptions)
		want string
	}{
		{spec(), func(o *client.JobOptions) { o.Sharding = jobspec.Off }, "order deterministic with sharding off: deterministic order needs sharding dynamic"},
		{spec(), func(o *client.JobOptions) { o.Delivery = jobspec.AtMostOnce }, "order deterministic with delivery at-most-once"},
		{spec(), func(o *client.JobOptions) { o.Share = true; o.Delivery = "" }, "order deterministic with share on"},
		{spec(), func(o *client.JobOptions) { o.Offload = jobspec.OffloadLocal }, "order deterministic with offload local"},
		{spec(), func(o *client.JobOptions) { o.NumConsumers = 2 }, "num_consumers 2: a deterministic job has one consumer; consumer i of N distributes a job of its own"},
		{shareOf(2, 2), func(*client.JobOptions) {}, "order_consumer: 2: want 0 to order_consumers-1 (1)"},
		{shareOf(199, 200), func(*client.JobOptions) {}, "consumer 199 of 200: the epoch has 188 batches, fewer than the consumers"},
		{spec(), func(o *client.JobOptions) { o.OffloadBoundary = 1 }, "offload_boundary 1: deterministic order is not yet with a cut"},
		{filtered, func(*client.JobOptions) {}, "ops[0].filter: not yet under order: deterministic"},
		{files, func(*client.JobOptions) {}, "reads range and synthetic sources so far"},
	} {
		o := options("det-refused", reorderBound)
		tc.edit(&o)
		it, err := cl.Distribute(context.Background(), tc.spec, o)
		if err == nil {
			it.Close()
			t.Errorf("%q: accepted", tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want it to say %q", err, tc.want)
		}
	}
	if jobs, err := cl.Jobs(context.Background()); err == nil && len(jobs) > 0 {
		t.Errorf("a refused job exists: %+v", jobs)
	}
}
