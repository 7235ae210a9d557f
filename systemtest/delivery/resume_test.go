package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestResumeFromCheckpoint: a consumer checkpoints after k batches and
// closes; a fresh client resumes the job from the checkpoint: what the
// two read is the dataset exactly once per epoch, for 1 epoch and for 3
// with the checkpoint taken in the second.
func TestResumeFromCheckpoint(t *testing.T) {
	c := testcluster.Start(t, 3)
	for _, tc := range []struct {
		name   string
		epochs int64
		k      int
	}{{"one-epoch", 1, 60}, {"three-epochs", 3, 450}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3000
			opts := client.JobOptions{Name: "resume-" + tc.name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: tc.epochs}
			it, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			before, ck := jobtest.ReadUntil(t, it, tc.k)
			t.Logf("checkpoint after %d batches: %d bytes", tc.k, len(ck))
			opts.Resume = ck
			it2, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it2.Close()
			after := jobtest.Drain(t, it2, 120*time.Second, nil)
			jobtest.CheckExactly(t, jobtest.Merge(before, after), n, int(tc.epochs))
			st := it2.Stats()
			t.Logf("resumed: %d batches; exactly-once counters %+v", after.Batches, st.Exact)
		})
	}
}

// TestResumeBadCheckpoint: a checkpoint of another job, dataset or epoch
// count, truncated, corrupted, of a newer format or of format 1 (without
// the cluster's MAC) is refused with an error that says so, and nothing
// is created.
func TestResumeBadCheckpoint(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)
	opts := client.JobOptions{Name: "bad-ck", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(500, 20, 10, 1), opts)
	if err != nil {
		t.Fatal(err)
	}
	_, ck := jobtest.ReadUntil(t, it, 5)
	flip := append([]byte(nil), ck...)
	flip[len(flip)/2] ^= 0x40
	newer := append([]byte(nil), ck...)
	newer[5] = 9
	v1 := append([]byte(nil), ck...)
	v1[4], v1[5] = 0, 1 // format 1: before checkpoints carried the cluster's MAC
	for _, tc := range []struct {
		name string
		ck   []byte
		o    func(client.JobOptions) client.JobOptions
		want string
	}{
		{"other-job", ck, func(o client.JobOptions) client.JobOptions { o.Name = "other"; return o }, `job "bad-ck", not "other"`},
		{"other-epochs", ck, func(o client.JobOptions) client.JobOptions { o.Epochs = 2; return o }, "1 epochs, not 2"},
		{"truncated", ck[:len(ck)-7], nil, "corrupted or truncated"},
		{"corrupted", flip, nil, "corrupted"},
		{"newer", newer, nil, "newer feedmesh"},
		{"format-1", v1, nil, "format version 1, written by a feedmesh from before checkpoints were signed"},
		{"not-one", []byte("hello"), nil, "not a feedmesh checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			if tc.o != nil {
				o = tc.o(o)
			}
			o.Resume = tc.ck
			_, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(500, 20, 10, 1), o)
			if !errors.Is(err, client.ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrBadCheckpoint saying %q", err, tc.want)
			}
		})
	}
	o := opts
	o.Resume = ck
	if _, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(501, 20, 10, 1), o); !errors.Is(err, client.ErrBadCheckpoint) || !strings.Contains(err.Error(), "another dataset") {
		t.Fatalf("another dataset: %v", err)
	}
}

// TestResumeAcrossClusterChanges: the checkpoint is taken on one cluster
// and the job resumed after (a) every node was killed and restarted from
// its data dir, (b) a node left and two joined: exactly once all the same.
func TestResumeAcrossClusterChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, c *testcluster.Cluster) int // returns the node to dial
	}{
		{"restarted", func(t *testing.T, c *testcluster.Cluster) int {
			for i := range 3 {
				c.Kill(i)
			}
			for i := range 3 {
				if err := c.Restart(i); err != nil {
					t.Fatal(err)
				}
			}
			c.WaitLeader(t, 30*time.Second)
			return 2
		}},
		{"one-out-two-in", func(t *testing.T, c *testcluster.Cluster) int {
			if err := c.Stop(2); err != nil {
				t.Fatal(err)
			}
			var added []int
			for range 2 {
				i, err := c.Add()
				if err != nil {
					t.Fatal(err)
				}
				added = append(added, i)
			}
			c.WaitFor(t, 30*time.Second, "the new nodes to be members", func() bool {
				_, l := c.Leader()
				return l != nil && len(l.Members()) >= 4
			})
			return added[1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.Start(t, 3)
			const n = 2000
			opts := client.JobOptions{Name: "resume-" + tc.name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 2}
			it, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			before, ck := jobtest.ReadUntil(t, it, 150)
			dialed := tc.change(t, c)
			opts.Resume = ck
			it2, err := jobtest.Dial(t, c, dialed).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it2.Close()
			after := jobtest.Drain(t, it2, 120*time.Second, nil)
			jobtest.CheckExactly(t, jobtest.Merge(before, after), n, 2)
			t.Logf("%d + %d batches; workers after the change: %d", before.Batches, after.Batches, len(it2.Workers()))
		})
	}
}

// TestResumeTwoConsumers: two consumers of one job (data-parallel ranks)
// each checkpoint and close; each resumes with its own checkpoint from a
// fresh client. The job waits for both, and the four reads together see
// every element once per epoch.
func TestResumeTwoConsumers(t *testing.T) {
	c := testcluster.Start(t, 3)
	const n = 3000
	opts := client.JobOptions{Name: "resume-two", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 2}
	spec := func() *pipeline.Spec { return jobtest.ShuffledSpec(n, 20, 10, 100) }
	a, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	type part struct {
		d  jobtest.Delivery
		ck []byte
	}
	pa, pb := make(chan part, 1), make(chan part, 1)
	go func() { d, ck := jobtest.ReadUntil(t, a, 120); pa <- part{d, ck} }()
	go func() { d, ck := jobtest.ReadUntil(t, b, 120); pb <- part{d, ck} }()
	x, y := <-pa, <-pb
	ra, rb := make(chan jobtest.Delivery, 1), make(chan jobtest.Delivery, 1)
	go resumeOn(t, c, 2, spec(), opts, x.ck, ra)
	go resumeOn(t, c, 0, spec(), opts, y.ck, rb)
	jobtest.CheckExactly(t, jobtest.Merge(x.d, y.d, <-ra, <-rb), n, 2)
}

// TestResumeConsumersOneAfterTheOther: consumer A reads and checkpoints
// alone, then consumer B joins the job, reads and checkpoints; each
// checkpoint says the job had one consumer (neither heard of the other).
// Resumed together, the job waits for both: the cluster knows B had
// elements delivered. Without that, A's resume started the job at once
// and delivered again what B had returned.
func TestResumeConsumersOneAfterTheOther(t *testing.T) {
	c := testcluster.Start(t, 3)
	const n = 2000
	opts := client.JobOptions{Name: "resume-seq", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	spec := func() *pipeline.Spec { return jobtest.ShuffledSpec(n, 20, 10, 100) }
	cl := jobtest.Dial(t, c, 0)
	a, err := cl.Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	da, cka := jobtest.ReadUntil(t, a, 30)
	b, err := cl.Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	db, ckb := jobtest.ReadUntil(t, b, 30)
	ra, rb := make(chan jobtest.Delivery, 1), make(chan jobtest.Delivery, 1)
	go resumeOn(t, c, 1, spec(), opts, cka, ra)
	go resumeOn(t, c, 2, spec(), opts, ckb, rb)
	jobtest.CheckExactly(t, jobtest.Merge(da, db, <-ra, <-rb), n, 1)
}

// resumeOn reads job opts of spec to its end through node i, resumed from
// ck, and sends what it delivered on out (an empty delivery after an
// error, which it reports). Run it in its own goroutine, one per consumer.
func resumeOn(t *testing.T, c *testcluster.Cluster, i int, spec *pipeline.Spec, opts client.JobOptions, ck []byte, out chan<- jobtest.Delivery) {
	opts.Resume = ck
	it, err := jobtest.Dial(t, c, i).Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Error(err)
		out <- jobtest.Delivery{Counts: map[int64]int{}}
		return
	}
	defer it.Close()
	d := jobtest.Drain(t, it, 120*time.Second, nil)
	t.Logf("resumed on node %d: %d batches, %+v", i, d.Batches, it.Stats().Exact)
	out <- d
}

// TestResumeSpreadsEvenly (issue 42): a job read with the default worker
// count (auto) is checkpointed after 200 of its 3,000 batches and resumed
// by another client: the three nodes share the rest evenly, each within
// half an even share of it (the bound: 0.5 to 1.5 of total/3; seen 0.85
// to 1.15, the first node ahead by the second or two it reads before the
// others join). Before, the first worker's first leases of the resumed
// job held the splits delivered before the checkpoint, read in no time;
// timed, they made its next lease LeaseSplits (256 of the 300 splits), and
// the workers that came after found little left: 28,000 / 0 / 0 elements
// in 24.9 s. Timing only splits read whole, a rate measured while the
// pipeline's buffers filled still made a lease of 186 splits under load
// (19,000 / 5,200 / 3,800); the lease policy's hold bounds that.
func TestResumeSpreadsEvenly(t *testing.T) {
	c := testcluster.Start(t, 3)
	const n, split, k = 30000, 100, 200
	spec := func() *pipeline.Spec { return jobtest.ShuffledSpec(n, split, 10, 100) }
	opts := client.JobOptions{Name: "resume-spread", Sharding: client.Dynamic, Offload: client.OffloadRemote}
	it, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	before, ck := jobtest.ReadUntil(t, it, k)
	it.Close()
	opts.Resume = ck
	it2, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Close()
	start := time.Now()
	after := jobtest.Drain(t, it2, 120*time.Second, nil)
	took := time.Since(start)
	jobtest.CheckExactly(t, jobtest.Merge(before, after), n, 1)
	st := it2.Stats()
	var total int64
	for _, ws := range st.Workers {
		total += ws.Elements
	}
	t.Logf("resumed: %d elements in %v from %d workers: %+v", total, took, len(st.Workers), st.Workers)
	if len(st.Workers) != 3 {
		t.Fatalf("%d workers delivered the resumed job, want the 3 nodes: %+v", len(st.Workers), st.Workers)
	}
	even := float64(total) / 3
	for w, ws := range st.Workers {
		if share := float64(ws.Elements) / even; share < 0.5 || share > 1.5 {
			t.Errorf("worker %s delivered %d of the %d elements resumed: %.2f of an even share, want 0.5 to 1.5", w, ws.Elements, total, share)
		}
	}
}
