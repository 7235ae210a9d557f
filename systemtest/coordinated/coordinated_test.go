package coordinated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/testcluster"
)

// consumerRounds is what one coordinated consumer received, by round.
type consumerRounds struct {
	rounds  []int64
	byRound map[int64]client.Batch
	err     error
}

// readCoordinated runs m consumers of one coordinated job concurrently to
// the end of data; each calls step (may be nil) after every batch.
func readCoordinated(t *testing.T, cl *client.Client, spec *pipeline.Spec, name string, m int, pad bool, step func(i int, b client.Batch)) []consumerRounds {
	t.Helper()
	out := make([]consumerRounds, m)
	var wg sync.WaitGroup
	for i := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: name, Coordinated: true, NumConsumers: m, ConsumerIndex: i, PadFinalRound: pad})
			if err != nil {
				out[i].err = err
				return
			}
			defer it.Close()
			out[i].byRound = map[int64]client.Batch{}
			for {
				b, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					out[i].err = fmt.Errorf("consumer %d after %d rounds: %w", i, len(out[i].rounds), err)
					return
				}
				if b.Round == nil {
					out[i].err = fmt.Errorf("consumer %d: batch without round", i)
					return
				}
				out[i].rounds = append(out[i].rounds, b.Round.Round)
				out[i].byRound[b.Round.Round] = b
				if step != nil {
					step(i, b)
				}
			}
		}()
	}
	wg.Wait()
	for i, c := range out {
		if c.err != nil {
			t.Fatalf("consumer %d: %v", i, c.err)
		}
	}
	return out
}

// checkIncreasing fails if a consumer got a round twice or out of order.
func checkIncreasing(t *testing.T, out []consumerRounds) {
	t.Helper()
	for i, c := range out {
		for k := 1; k < len(c.rounds); k++ {
			if c.rounds[k] <= c.rounds[k-1] {
				t.Fatalf("consumer %d: round %d after round %d (delivered twice or out of order)", i, c.rounds[k], c.rounds[k-1])
			}
		}
	}
}

func TestCoordinatedReads(t *testing.T) {
	// The job is ~0.3 s of work per worker (a tenth of that was too
	// little on a loaded machine: a worker whose task started late found
	// the splits gone, CI). A worker that keeps a
	// failover's worth of splits leased ahead (the fast preset's 300 ms)
	// may take all of it before the others start, and this test wants
	// every worker to serve rounds.
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.Worker.FailoverAhead = -1 }))
	cl := jobtest.Dial(t, c, 0)
	const m = 4
	out := readCoordinated(t, cl, jobtest.TextSpec(9000, 100), "coord", m, true, nil)
	checkIncreasing(t, out)
	n := len(out[0].rounds)
	if n < 20 {
		t.Fatalf("only %d rounds", n)
	}
	workers := map[string]int{}
	var rows int64
	for i := 1; i < m; i++ {
		if len(out[i].rounds) != n || out[i].rounds[n-1] != out[0].rounds[n-1] {
			t.Fatalf("consumer %d saw %d rounds ending at %d; consumer 0 %d ending at %d", i, len(out[i].rounds), out[i].rounds[len(out[i].rounds)-1], n, out[0].rounds[n-1])
		}
	}
	for k, r := range out[0].rounds {
		b0 := out[0].byRound[r]
		workers[b0.Worker]++
		for i := range m {
			b := out[i].byRound[r]
			if out[i].rounds[k] != r {
				t.Fatalf("round #%d: consumer %d got round %d, consumer 0 round %d", k, i, out[i].rounds[k], r)
			}
			if b.Worker != b0.Worker || b.Round.Bucket != b0.Round.Bucket {
				t.Fatalf("round %d: consumer %d got bucket %d from %s, consumer 0 bucket %d from %s", r, i, b.Round.Bucket, b.Worker, b0.Round.Bucket, b0.Worker)
			}
			if b.Round.Index != i || len(b.Round.PaddedTokens) != m {
				t.Fatalf("round %d: consumer %d got index %d, %d padded counts", r, i, b.Round.Index, len(b.Round.PaddedTokens))
			}
			rows += b.Rows()
		}
	}
	if len(workers) != 3 {
		t.Fatalf("rounds served by %v, want all 3 workers", workers)
	}
	// The rounds cycle: while every worker still has data (the rounds
	// before the first one skipped because its worker ended), round r comes
	// from the same worker as round r-3, and three in a row from three.
	prefix := 0
	for prefix < n && out[0].rounds[prefix] == int64(prefix) {
		prefix++
	}
	if prefix < 9 {
		t.Fatalf("only %d rounds before the first skipped one", prefix)
	}
	w := func(r int) string { return out[0].byRound[int64(r)].Worker }
	for r := 2; r < prefix; r++ {
		if w(r) == w(r-1) || w(r) == w(r-2) || w(r-1) == w(r-2) || (r >= 3 && w(r) != w(r-3)) {
			t.Fatalf("rounds %d..%d from %s, %s, %s: not a rotation", r-2, r, w(r-2), w(r-1), w(r))
		}
	}
	// Padded out: every element arrives exactly once over all consumers.
	if rows != 9000 {
		t.Fatalf("%d rows delivered, want 9000", rows)
	}
}

func TestCoordinatedWorkerKilled(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const m = 4
	var once sync.Once
	victim := ""
	out := readCoordinated(t, cl, slowText(4000, 50), "coord-kill", m, false, func(i int, b client.Batch) {
		if i != 0 || b.Round.Round < 10 {
			return
		}
		once.Do(func() { victim = killUpcoming(c, b) })
	})
	if victim == "" {
		t.Fatal("no worker was killed")
	}
	checkIncreasing(t, out)
	for i, co := range out {
		after := 0
		for _, r := range co.rounds {
			if r > 10+200 && co.byRound[r].Worker == victim {
				t.Fatalf("consumer %d got round %d from %s long after it was killed", i, r, victim)
			}
			if r > 10 {
				after++
			}
		}
		if after < 10 {
			t.Fatalf("consumer %d: only %d rounds after the kill", i, after)
		}
	}
}

func TestCoordinatedWorkerJoins(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	const m = 2
	var once sync.Once
	joined := ""
	out := readCoordinated(t, cl, slowText(4000, 50), "coord-join", m, false, func(i int, b client.Batch) {
		if i != 0 || b.Round.Round < 5 {
			return
		}
		once.Do(func() {
			k, err := c.Add()
			if err != nil {
				t.Error(err)
				return
			}
			joined = c.Name(k)
		})
	})
	checkIncreasing(t, out)
	first := int64(-1)
	for _, r := range out[0].rounds {
		if out[0].byRound[r].Worker == joined {
			first = r
			break
		}
	}
	if first < 0 {
		t.Fatalf("the joined worker %s served no round", joined)
	}
	// It joined once consumers had reported round 0 or later, so it is
	// added from round RoundLookahead or later, never earlier.
	if first < fsm.RoundLookahead {
		t.Fatalf("the joined worker served round %d, before the earliest round it may be added at (%d)", first, fsm.RoundLookahead)
	}
	t.Logf("worker %s joined; first served round %d", joined, first)
}

// killUpcoming kills a worker that serves an upcoming round: not the one
// that served b, and never node 0 (the one the tests' clients dial); it
// returns its name ("" if none).
func killUpcoming(c *testcluster.Cluster, b client.Batch) string {
	for _, k := range c.Running() {
		if k != 0 && c.Name(k) != b.Worker {
			c.Kill(k)
			return c.Name(k)
		}
	}
	return ""
}

// slowText is jobtest.TextSpec with a per-element cost, so the job runs long enough
// for a fault in the middle.
func slowText(count, splitSize int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: count, Seed: 5, SplitSize: splitSize, MaxWords: 512}))
	s.Cost(0, 300)
	s.Map("tokenize_whitespace", fn.Args{"vocab_size": 1000}, 1)
	s.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{16, 32, 64, 128}, BatchSizes: []int64{16, 8, 4, 2, 1}})
	return s
}

func TestCoordinatedConsumerRestarts(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	spec := slowText(3000, 50)
	opts := func(i int) client.JobOptions {
		return client.JobOptions{Name: "coord-restart", Coordinated: true, NumConsumers: 2, ConsumerIndex: i}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other := make(chan []int64, 1)
	go func() {
		it, err := cl.Distribute(ctx, spec, opts(1))
		if err != nil {
			t.Error(err)
			other <- nil
			return
		}
		defer it.Close()
		var rounds []int64
		for b, err := range it.All(ctx) {
			if err != nil {
				t.Error(err)
				break
			}
			rounds = append(rounds, b.Round.Round)
		}
		other <- rounds
	}()
	first, err := cl.Distribute(ctx, spec, opts(0))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 5 {
		b, err := first.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = b.Round.Round
	}
	first.Close()
	again, err := cl.Distribute(ctx, spec, opts(0))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	// Exactly-once (the default) gives the restarted consumer a filler
	// for each round its earlier instance took, so that it stays aligned
	// with the other rank; the batches start after them.
	var resumed []int64
	for b, err := range again.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if !b.Round.Filler {
			resumed = append(resumed, b.Round.Round)
		}
	}
	rounds1 := <-other
	if len(resumed) == 0 || resumed[0] <= last {
		t.Fatalf("restarted consumer began at %v after reading up to round %d", resumed[:min(3, len(resumed))], last)
	}
	if len(rounds1) == 0 || resumed[len(resumed)-1] != rounds1[len(rounds1)-1] {
		t.Fatalf("restarted consumer ended at %v, the other at %v", resumed[len(resumed)-1:], rounds1[len(rounds1)-1:])
	}
}

func TestCoordinatedValidation(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)
	ctx := context.Background()
	for _, tc := range []struct {
		spec *pipeline.Spec
		o    client.JobOptions
		want string
	}{
		{jobtest.RangeSpec(100, 10, 4), client.JobOptions{Name: "v1", Coordinated: true, NumConsumers: 2}, "must end in bucket_by_sequence_length"},
		{jobtest.TextSpec(100, 10), client.JobOptions{Name: "v2", Coordinated: true}, "NumConsumers: coordinated reads need"},
		{jobtest.TextSpec(100, 10), client.JobOptions{Name: "v3", Coordinated: true, NumConsumers: 2, Sharding: client.Off}, "needs sharding dynamic"},
		{jobtest.TextSpec(100, 10), client.JobOptions{Name: "v4", Coordinated: true, NumConsumers: 2, ConsumerIndex: 2}, "ConsumerIndex 2"},
		{jobtest.TextSpec(100, 10), client.JobOptions{Name: "v5", PadFinalRound: true}, "only for coordinated"},
	} {
		_, err := cl.Distribute(ctx, tc.spec, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.o.Name, err, tc.want)
		}
	}
}
