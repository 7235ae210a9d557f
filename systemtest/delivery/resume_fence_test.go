package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// preempted reads batches of it, checkpoints, and then dies as a
// SIGKILLed trainer does: its client's socket closes with no detach, so
// the job keeps the consumer until its lease expires (consumer_ttl, 30 s
// by default). It returns what was read and the checkpoint.
func preempted(t *testing.T, cl *client.Client, it *client.Iterator, batches int) (jobtest.Delivery, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := jobtest.Delivery{Counts: map[int64]int{}}
	for d.Batches < batches {
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatalf("after %d batches: %v", d.Batches, err)
		}
		d.Batches++
		for _, v := range jobtest.Values(t, b) {
			d.Counts[v]++
		}
	}
	ck, err := it.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	cl.Close() // no detach: the consumer is left to its lease
	t.Cleanup(func() { it.Close() })
	return d, ck
}

// TestResumeFencesPreemptedConsumer (issue 38 item 3): a trainer
// checkpoints and dies without detaching (preemption); a new process
// resumes from the checkpoint at once, within the dead consumer's lease.
// The checkpoint is proof that the run is being resumed: the dead
// consumer is fenced and the resume proceeds (it failed with JobInUse for
// the lease's 30 s before), and the two read the dataset exactly once.
// Two consumers that die together (DataLoader workers) resume each from
// its own checkpoint at once too. A consumer fenced that was alive stops
// with ErrFenced. No message shows Raft internals.
func TestResumeFencesPreemptedConsumer(t *testing.T) {
	c := testcluster.Start(t, 3)
	const n = 3000

	t.Run("one", func(t *testing.T) {
		opts := client.JobOptions{Name: "fence-one", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
		cl := jobtest.Dial(t, c, 0)
		it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
		if err != nil {
			t.Fatal(err)
		}
		before, ck := preempted(t, cl, it, 40)
		start := time.Now()
		opts.Resume = ck
		it2, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
		if err != nil {
			t.Fatalf("resume within the dead consumer's lease: %v", err)
		}
		defer it2.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		first, err := it2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		after := jobtest.Drain(t, it2, 120*time.Second, nil)
		for _, v := range jobtest.Values(t, first) {
			after.Counts[v]++
		}
		jobtest.CheckExactly(t, jobtest.Merge(before, after), n, 1)
		if took > 10*time.Second {
			t.Errorf("the resumed reader's first batch came %v after the resume began; want it at once, not after the dead consumer's lease", took)
		}
		t.Logf("resume to first batch: %v", took)
	})

	t.Run("two", func(t *testing.T) {
		opts := client.JobOptions{Name: "fence-two", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
		cls := []*client.Client{jobtest.Dial(t, c, 0), jobtest.Dial(t, c, 1)}
		var its []*client.Iterator
		for _, cl := range cls {
			it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			its = append(its, it)
		}
		// Each hears of the other (a heartbeat) before it checkpoints:
		// each checkpoint then says the job had two consumers.
		time.Sleep(500 * time.Millisecond)
		var before []jobtest.Delivery
		var cks [][]byte
		for i, it := range its {
			d, ck := preempted(t, cls[i], it, 20)
			before, cks = append(before, d), append(cks, ck)
		}
		var resumed []*client.Iterator
		for i, ck := range cks {
			o := opts
			o.Resume = ck
			it, err := jobtest.Dial(t, c, 2-i).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), o)
			if err != nil {
				t.Fatalf("resume %d within the dead consumers' leases: %v", i, err)
			}
			defer it.Close()
			resumed = append(resumed, it)
		}
		after := jobtest.CollectAll(t, resumed, nil, nil)
		jobtest.CheckExactly(t, jobtest.Merge(append(before, after...)...), n, 1)
	})

	t.Run("alive", func(t *testing.T) {
		// A consumer still alive when its run is resumed elsewhere (a
		// trainer thought dead) is fenced, and says so.
		opts := client.JobOptions{Name: "fence-alive", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
		it, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), jobtest.SlowSpec(n, 20, 10, 2000), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
		ck, err := it.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		opts.Resume = ck
		it2, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.SlowSpec(n, 20, 10, 2000), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer it2.Close()
		for {
			_, err := it.Next(ctx)
			if err == nil {
				continue
			}
			if !errors.Is(err, client.ErrFenced) || !strings.Contains(err.Error(), "resumed from a checkpoint") {
				t.Fatalf("the fenced consumer's Next: %v; want ErrFenced saying the job was resumed", err)
			}
			t.Logf("fenced consumer: %v", err)
			break
		}
	})

	t.Run("other-options", func(t *testing.T) {
		// A resume the job refuses (other options) fences nothing, and
		// its message names the option, not Raft's apply.
		opts := client.JobOptions{Name: "fence-opts", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
		cl := jobtest.Dial(t, c, 0)
		it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
		if err != nil {
			t.Fatal(err)
		}
		_, ck := preempted(t, cl, it, 5)
		opts.Resume, opts.Compression = ck, "zstd"
		_, err = jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
		if err == nil || !strings.Contains(err.Error(), "compression") {
			t.Fatalf("resume with another compression: %v; want a refusal naming it", err)
		}
		for _, internal := range []string{"apply CreateJob", "at index", "state machine"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("the error shows Raft internals (%q): %v", internal, err)
			}
		}
		info, ok := jobtest.JobInfo(t, jobtest.Dial(t, c, 2), "fence-opts")
		if !ok || len(info.Consumers) != 1 {
			t.Errorf("job after the refused resume: %+v (found %v); want its consumer still attached", info.Consumers, ok)
		}
	})

	t.Run("earlier-run", func(t *testing.T) {
		// A checkpoint of an earlier run of the name (the job was
		// collected and created again) fences nobody: JobInUse, in the
		// state machine's words, not Raft's.
		opts := client.JobOptions{Name: "fence-earlier", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, GCAfter: 200 * time.Millisecond}
		cl := jobtest.Dial(t, c, 0)
		it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
		if err != nil {
			t.Fatal(err)
		}
		_, ck := jobtest.ReadUntil(t, it, 5)
		first, _ := jobtest.JobInfo(t, cl, opts.Name)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if info, ok := jobtest.JobInfo(t, cl, opts.Name); !ok || info.ID != first.ID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the job was not collected within 30 s of gc_after 200ms")
			}
			time.Sleep(100 * time.Millisecond)
		}
		again, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		o := opts
		o.Resume = ck
		_, err = jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 100), o)
		if err == nil || !strings.Contains(err.Error(), "still in use") {
			t.Fatalf("resume from a checkpoint of an earlier run while the job is read: %v; want JobInUse", err)
		}
		for _, internal := range []string{"apply CreateJob", "at index", "state machine", "raftnode"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("the error shows Raft internals (%q): %v", internal, err)
			}
		}
		t.Logf("refused: %v", err)
	})
}
