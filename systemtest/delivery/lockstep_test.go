package delivery

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// TestExactlyOnceLockstepConsumers: two consumers of one exactly-once job
// read in lock step, as data-parallel ranks do (each step takes one batch
// from every rank): one rank's end of data must not wait on batches
// buffered for the other, which the lock step keeps it from reading. Every
// sentence id reaches exactly one of them once.
func TestExactlyOnceLockstepConsumers(t *testing.T) {
	nConsumers := 2
	c := testcluster.Start(t, 2)
	src := pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 3000, Seed: 11, SplitSize: 500, MaxWords: 1024})
	spec := pipeline.NewSpec(src)
	spec.Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 2)
	spec.Filter("length_between", fn.Args{"tensor": "tokens", "min": 1, "max": 4096})
	var bs []int64
	for b := int64(8); b <= 1024; b = max(b+1, b*125/100) {
		bs = append(bs, b)
	}
	sizes := make([]int64, len(bs)+1)
	for i := range sizes {
		sizes[i] = 16
	}
	spec.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: bs, BatchSizes: sizes})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var its []*client.Iterator
	for i := range nConsumers {
		fast := transport.FastConfig()
		cl, err := client.Dial(ctx, c.Node(i).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "lock", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		its = append(its, it)
	}
	ids := map[int64]int{}
	done := make([]bool, nConsumers)
	for left := nConsumers; left > 0; {
		for i, it := range its {
			if done[i] {
				continue
			}
			b, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				done[i] = true
				left--
				continue
			}
			if err != nil {
				jobs, _ := its[0].Stats(), 0
				_, l := c.WaitLeader(t, time.Second)
				v, _ := l.Raft().Job("lock")
				t.Logf("progress %+v exact %+v", *v.Progress, *v.Progress.Exact)
				t.Fatalf("consumer %d: %v; stats %+v %+v", i, err, jobs, jobs.Exact)
			}
			tv, _ := b.Get("id")
			vs, err := tv.Int64s()
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				ids[v]++
			}
		}
	}
	for v, k := range ids {
		if k != 1 || v < 0 || v >= 3000 {
			t.Fatalf("sentence %d delivered %d times", v, k)
		}
	}
	if len(ids) < 2900 { // length_between drops only empty lines
		t.Fatalf("only %d of 3000 sentences delivered", len(ids))
	}
}
