package coordinated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// rankRead is what one coordinated consumer (rank) received.
type rankRead struct {
	rounds  []int64 // per batch, fillers included
	fillers int
	ids     map[int64]int
	workers map[int64]string // round → the worker that served it
	ckpt    []byte           // Checkpoint after the last batch read, if asked
	err     error
}

// readRanks runs m consumers of one coordinated job concurrently; each
// reads up to limit batches (0: to the end of data), then takes a
// checkpoint if limit > 0. resume[i], if any, is rank i's checkpoint.
// step runs after every batch.
func readRanks(t *testing.T, cl *client.Client, name string, m int, limit int, resume [][]byte, step func(i int, b client.Batch)) []rankRead {
	t.Helper()
	out := make([]rankRead, m)
	var wg sync.WaitGroup
	for i := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &out[i]
			r.ids, r.workers = map[int64]int{}, map[int64]string{}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			o := client.JobOptions{Name: name, Coordinated: true, NumConsumers: m, ConsumerIndex: i, Delivery: client.ExactlyOnce}
			if resume != nil {
				o.Resume = resume[i]
			}
			it, err := cl.Distribute(ctx, slowText(3000, 50), o)
			if err != nil {
				r.err = err
				return
			}
			defer it.Close()
			for limit == 0 || len(r.rounds) < limit {
				b, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					r.err = fmt.Errorf("rank %d after %d batches: %w", i, len(r.rounds), err)
					return
				}
				if b.Round == nil {
					r.err = fmt.Errorf("rank %d: a batch without its round", i)
					return
				}
				r.rounds = append(r.rounds, b.Round.Round)
				r.workers[b.Round.Round] = b.Worker
				if b.Round.Filler {
					r.fillers++
				}
				if tv, ok := b.Get("id"); ok {
					vs, err := tv.Int64s()
					if err != nil {
						r.err = err
						return
					}
					for _, v := range vs {
						r.ids[v]++
					}
				} else {
					// Fillers too carry the job's tensors (with no rows).
					r.err = fmt.Errorf("rank %d: a batch of %d rows (filler %v) without ids", i, b.Rows(), b.Round.Filler)
					return
				}
				if step != nil {
					step(i, b)
				}
			}
			if limit > 0 {
				r.ckpt, r.err = it.Checkpoint()
			}
		}()
	}
	wg.Wait()
	for i, r := range out {
		if r.err != nil {
			t.Fatalf("rank %d: %v", i, r.err)
		}
		for k := 1; k < len(r.rounds); k++ {
			if r.rounds[k] <= r.rounds[k-1] {
				t.Fatalf("rank %d: round %d after round %d", i, r.rounds[k], r.rounds[k-1])
			}
		}
	}
	return out
}

// checkRanksExactly checks that the ranks' reads together hold every id
// in [0, n) once, and that every rank read the same rounds.
func checkRanksExactly(t *testing.T, n int64, reads ...[]rankRead) {
	t.Helper()
	ids := map[int64]int{}
	for _, rr := range reads {
		for i, r := range rr {
			for v, k := range r.ids {
				ids[v] += k
			}
			if fmt.Sprint(r.rounds) != fmt.Sprint(rr[0].rounds) {
				t.Fatalf("rank %d read %d rounds, rank 0 %d: the ranks are not aligned (rank %d: %v…; rank 0: %v…)",
					i, len(r.rounds), len(rr[0].rounds), i, r.rounds[:min(8, len(r.rounds))], rr[0].rounds[:min(8, len(rr[0].rounds))])
			}
		}
	}
	if int64(len(ids)) != n {
		t.Errorf("%d distinct elements delivered, want %d", len(ids), n)
	}
	for v := range n {
		if ids[v] != 1 {
			t.Fatalf("element %d delivered %d times, want once", v, ids[v])
		}
	}
}

// TestCoordinatedExactlyOnceWorkerKilled: 4 ranks of an exactly-once
// coordinated job; the worker of an upcoming round is killed: every element
// arrives once, and every rank gets one batch per round (a round lost with
// the worker is a filler for the ranks that did not get it).
func TestCoordinatedExactlyOnceWorkerKilled(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const m = 4
	var once sync.Once
	victim := ""
	out := readRanks(t, cl, "coord-eo-kill", m, 0, nil, func(i int, b client.Batch) {
		if i != 0 || b.Round.Round < 10 {
			return
		}
		once.Do(func() { victim = killUpcoming(c, b) })
	})
	if victim == "" {
		t.Fatal("no worker was killed")
	}
	checkRanksExactly(t, 3000, out)
	t.Logf("killed %s; %d rounds per rank, %d of them fillers for rank 0", victim, len(out[0].rounds), out[0].fillers)
}

// TestCoordinatedCheckpointResume: 4 ranks read 12 rounds each, take their
// checkpoints at that round and close; 4 new ranks resume from them: the
// two reads together hold every element once, and the ranks stay aligned.
func TestCoordinatedCheckpointResume(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const m = 4
	first := readRanks(t, cl, "coord-eo-ckpt", m, 12, nil, nil)
	ckpts := make([][]byte, m)
	for i, r := range first {
		ckpts[i] = r.ckpt
	}
	rest := readRanks(t, cl, "coord-eo-ckpt", m, 0, ckpts, nil)
	checkRanksExactly(t, 3000, first, rest)
	t.Logf("checkpoints of %d bytes (rank 0); resumed: %d rounds per rank", len(ckpts[0]), len(rest[0].rounds))

	// A rank's checkpoint is its own.
	o := client.JobOptions{Name: "coord-eo-ckpt", Coordinated: true, NumConsumers: m, ConsumerIndex: 1, Delivery: client.ExactlyOnce, Resume: ckpts[0]}
	if _, err := cl.Distribute(context.Background(), slowText(3000, 50), o); !errors.Is(err, client.ErrBadCheckpoint) {
		t.Fatalf("rank 1 resuming from rank 0's checkpoint: %v, want ErrBadCheckpoint", err)
	}
}
