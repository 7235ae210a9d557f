package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

// TestCoordinatedExactlyOnceProcessKilled: three real node processes; four
// ranks read an exactly-once coordinated job (the default) of bucketed
// text; the Raft leader's process, a worker of upcoming rounds, is
// SIGKILLed (or, if the dialed node leads, another worker): every sentence
// id arrives once over the four ranks, and every rank reads the same
// rounds (fillers for the rounds it lost with the dead worker).
func TestCoordinatedExactlyOnceProcessKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 node processes")
	}
	nodes := startNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const dialed = 0
	cl, leader := dialFormed(t, ctx, nodes, dialed)
	defer cl.Close()
	const n, m = 3000, 4
	spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: n, Seed: 5, SplitSize: 50, MaxWords: 512}))
	spec.Cost(0, 400)
	spec.Map("tokenize_whitespace", fn.Args{"vocab_size": 1000}, 1)
	spec.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{16, 32, 64, 128}, BatchSizes: []int64{16, 8, 4, 2, 1}})

	victim := -1
	for i, np := range nodes {
		if np.name == leader && i != dialed {
			victim = i
		}
	}
	if victim < 0 {
		victim = 2
	}
	var killed atomic.Bool
	rounds := make([][]int64, m)
	ids := make([]map[int64]int, m)
	fillers := make([]int, m)
	errs := make([]error, m)
	var wg sync.WaitGroup
	for i := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = map[int64]int{}
			it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "coord-eo-process", Coordinated: true, NumConsumers: m, ConsumerIndex: i})
			if err != nil {
				errs[i] = err
				return
			}
			defer it.Close()
			for {
				b, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					errs[i] = fmt.Errorf("after %d rounds: %w", len(rounds[i]), err)
					return
				}
				rounds[i] = append(rounds[i], b.Round.Round)
				if b.Round.Filler {
					fillers[i]++
				}
				if tv, ok := b.Get("id"); ok {
					vs, err := tv.Int64s()
					if err != nil {
						errs[i] = err
						return
					}
					for _, v := range vs {
						ids[i][v]++
					}
				}
				if i == 0 && len(rounds[0]) == 20 && killed.CompareAndSwap(false, true) {
					if err := nodes[victim].cmd.Process.Kill(); err != nil { // SIGKILL
						errs[i] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
	if !killed.Load() {
		t.Fatal("the job ended before the kill")
	}
	total := map[int64]int{}
	for i := range m {
		if fmt.Sprint(rounds[i]) != fmt.Sprint(rounds[0]) {
			t.Fatalf("rank %d read %d rounds, rank 0 %d: not aligned", i, len(rounds[i]), len(rounds[0]))
		}
		for v, k := range ids[i] {
			total[v] += k
		}
	}
	for v := range int64(n) {
		if total[v] != 1 {
			t.Fatalf("sentence %d delivered %d times, want once", v, total[v])
		}
	}
	t.Logf("SIGKILLed %s (leader at formation: %s): %d sentences once over %d ranks; %d rounds per rank, %d fillers for rank 0",
		nodes[victim].name, leader, n, m, len(rounds[0]), fillers[0])
}
