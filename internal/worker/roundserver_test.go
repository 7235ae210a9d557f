package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/bucketing"
)

// testWindow is a window of bucket whose batches are told apart by their
// token counts (ids); each batch's padded tokens are 10×id.
func testWindow(bucket int, ids ...int64) bucketing.Window[coordBatch] {
	w := bucketing.Window[coordBatch]{Bucket: bucket}
	for _, id := range ids {
		w.Batches = append(w.Batches, coordBatch{tokens: id, padded: 10 * id})
	}
	return w
}

// roundStep is one event of a round server's life: a window becomes
// ready (window), production ends (end), or a consumer asks for (round,
// index) (take) and gets batch id of bucket, skip, end or an error.
type roundStep struct {
	op     string // "window", "end", "take"
	window bucketing.Window[coordBatch]
	err    error // end: production's error

	round  int64
	index  int
	id     int64 // take: the batch's id (its tokens)
	bucket int
	skip   bool
	end    bool
	fails  bool // take: an error
	// again: the take is by a new instance of the consumer (a restart),
	// not the one that took before.
	again bool
}

// consumer names the iterator that asks: "c<index>", or a restarted one.
func (s roundStep) consumer() string {
	if s.again {
		return fmt.Sprintf("c%d-restarted", s.index)
	}
	return fmt.Sprintf("c%d", s.index)
}

func take(r int64, i int, id int64, bucket int) roundStep {
	return roundStep{op: "take", round: r, index: i, id: id, bucket: bucket}
}
func takeSkip(r int64, i int) roundStep { return roundStep{op: "take", round: r, index: i, skip: true} }

// restarted is s asked by a new instance of the consumer.
func restarted(s roundStep) roundStep  { s.again = true; return s }
func takeEnd(r int64, i int) roundStep { return roundStep{op: "take", round: r, index: i, end: true} }
func takeFails(r int64, i int) roundStep {
	return roundStep{op: "take", round: r, index: i, fails: true}
}
func ready(w bucketing.Window[coordBatch]) roundStep {
	return roundStep{op: "window", window: w}
}

func TestRoundServer(t *testing.T) {
	boom := errors.New("boom")
	scripts := []struct {
		name    string
		m, held int
		steps   []roundStep
	}{
		{"the first request fixes a round; every consumer gets the same window", 2, 4, []roundStep{
			ready(testWindow(1, 10, 11)), ready(testWindow(2, 20, 21)),
			take(0, 1, 11, 1), // consumer 1 first: round 0 is the first window
			take(0, 0, 10, 1),
			take(1, 0, 20, 2),
			take(1, 1, 21, 2),
		}},
		{"rounds this worker was not asked for are skipped", 1, 4, []roundStep{
			ready(testWindow(0, 10)), ready(testWindow(0, 20)),
			take(3, 0, 10, 0), // round 3 is this worker's first
			takeSkip(1, 0),    // below the highest fixed round, never fixed
			takeSkip(2, 0),
			take(5, 0, 20, 0),
			takeSkip(4, 0),
		}},
		{"a batch taken by an earlier instance of its consumer is skipped", 2, 4, []roundStep{
			ready(testWindow(0, 10, 11)),
			take(0, 0, 10, 0),
			restarted(takeSkip(0, 0)), // a restarted consumer asks again
			take(0, 1, 11, 0),
			restarted(takeSkip(0, 1)), // every batch taken: the round is no longer held
			restarted(takeSkip(0, 0)),
		}},
		{"the same instance asking again (its stream broke) gets the same answer", 2, 4, []roundStep{
			ready(testWindow(0, 10, 11)), ready(testWindow(1, 20, 21)),
			take(0, 0, 10, 0),
			take(0, 0, 10, 0), // the stream broke before the batch arrived
			restarted(takeSkip(0, 0)),
			take(0, 0, 10, 0), // still the first instance's
			take(0, 1, 11, 0),
			take(0, 1, 11, 0), // every batch taken, the round no longer held: still
			take(1, 0, 20, 1),
			takeSkip(0, 0), // it has gone on to round 1: round 0 arrived
			take(1, 0, 20, 1),
		}},
		{"rounds dropped past RoundsHeld are skipped", 2, 2, []roundStep{
			ready(testWindow(0, 10, 11)), ready(testWindow(0, 20, 21)), ready(testWindow(0, 30, 31)),
			take(0, 0, 10, 0),
			take(1, 0, 20, 0),
			take(2, 0, 30, 0), // three rounds held, two allowed: round 0 goes
			takeSkip(0, 1),    // its consumer 1 was too slow
			take(1, 1, 21, 0),
			take(2, 1, 31, 0),
		}},
		{"end of data: the same end for every consumer from the first round fixed after it", 2, 4, []roundStep{
			ready(testWindow(3, 10, 11)),
			{op: "end"},
			take(0, 0, 10, 3),
			takeEnd(1, 0),
			takeEnd(1, 1),
			takeEnd(7, 0),
			take(0, 1, 11, 3), // a round fixed before the end is still served
		}},
		{"production failed", 2, 4, []roundStep{
			{op: "end", err: boom},
			takeFails(0, 0),
		}},
		{"requests out of range are refused without taking a window", 2, 2, []roundStep{
			takeFails(0, 2),
			takeFails(0, -1),
			ready(testWindow(0, 10, 11)), ready(testWindow(0, 20, 21)),
			take(0, 0, 10, 0),
			takeFails(3, 0), // beyond the last fixed round + RoundsHeld
			take(2, 0, 20, 0),
		}},
	}
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			rs := newRoundServer(sc.m, 8, sc.held)
			for i, s := range sc.steps {
				switch s.op {
				case "window":
					rs.windows <- s.window
				case "end":
					rs.end(s.err)
				case "take":
					a := rs.take(context.Background(), s.round, s.index, s.consumer())
					checkAnswer(t, i, s, a)
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
			}
		})
	}
}

func checkAnswer(t *testing.T, i int, s roundStep, a roundAnswer) {
	t.Helper()
	switch {
	case s.fails:
		if a.err == nil {
			t.Fatalf("step %d: take(%d, %d) = %+v, want an error", i, s.round, s.index, a)
		}
	case a.err != nil:
		t.Fatalf("step %d: take(%d, %d): %v", i, s.round, s.index, a.err)
	case a.skip != s.skip || a.end != s.end:
		t.Fatalf("step %d: take(%d, %d) = skip %v end %v, want skip %v end %v", i, s.round, s.index, a.skip, a.end, s.skip, s.end)
	case s.skip || s.end:
	case a.b.tokens != s.id || a.bucket != s.bucket:
		t.Fatalf("step %d: take(%d, %d) = batch %d of bucket %d, want %d of bucket %d", i, s.round, s.index, a.b.tokens, a.bucket, s.id, s.bucket)
	default:
		// Every consumer learns the padded tokens of the whole round.
		var want []int64
		for j := range len(a.padded) {
			want = append(want, 10*(s.id-int64(s.index)+int64(j)))
		}
		if !slices.Equal(a.padded, want) {
			t.Fatalf("step %d: take(%d, %d): padded %v, want %v", i, s.round, s.index, a.padded, want)
		}
	}
}

func TestRoundServerProductionError(t *testing.T) {
	rs := newRoundServer(1, 1, 4)
	boom := errors.New("boom")
	rs.end(boom)
	if a := rs.take(context.Background(), 0, 0, fmt.Sprint("c", 0)); !errors.Is(a.err, boom) {
		t.Fatalf("take after a failed production: %+v, want %v", a, boom)
	}
}

func TestRoundServerCancelledWhileWaiting(t *testing.T) {
	rs := newRoundServer(2, 1, 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if a := rs.take(ctx, 0, 0, fmt.Sprint("c", 0)); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("take with no window and a cancelled context: %+v", a)
	}
	// Nothing was fixed: the round is served once a window comes.
	rs.windows <- testWindow(0, 10, 11)
	if a := rs.take(context.Background(), 0, 1, fmt.Sprint("c", 1)); a.err != nil || a.b.tokens != 11 {
		t.Fatalf("take after the cancelled wait: %+v", a)
	}
}

// TestRoundServerConcurrentConsumers: consumers that ask for the same
// round at once, before its window is ready, all get that one window.
func TestRoundServerConcurrentConsumers(t *testing.T) {
	const m = 4
	rs := newRoundServer(m, 2, 8)
	got := make([]roundAnswer, m)
	var wg sync.WaitGroup
	for i := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = rs.take(context.Background(), 0, i, fmt.Sprint("c", i))
		}()
	}
	rs.windows <- testWindow(2, 10, 11, 12, 13)
	rs.windows <- testWindow(5, 20, 21, 22, 23)
	wg.Wait()
	for i, a := range got {
		if a.err != nil || a.skip || a.end || a.bucket != 2 || a.b.tokens != int64(10+i) {
			t.Errorf("consumer %d: %+v, want batch %d of bucket 2", i, a, 10+i)
		}
	}
}

// TestRoundServerKeep: an exactly-once server drops no round with a batch
// not taken; past RoundsHeld such rounds it fixes the next round only once
// one of them is taken completely, while the fixed rounds stay served.
func TestRoundServerKeep(t *testing.T) {
	rs := newRoundServer(2, 4, 2)
	rs.keep = true
	for k := range int64(4) {
		rs.windows <- testWindow(0, 10*k, 10*k+1)
	}
	ctx := context.Background()
	for r := range int64(2) { // consumer 0 takes rounds 0 and 1; consumer 1 is slow
		if a := rs.take(ctx, r, 0, fmt.Sprint("c", 0)); a.err != nil || a.skip || a.b.tokens != 10*r {
			t.Fatalf("round %d index 0: %+v", r, a)
		}
	}
	// Round 2 would be a third round waiting for consumer 1: it waits.
	got := make(chan roundAnswer, 1)
	go func() { got <- rs.take(ctx, 2, 0, fmt.Sprint("c", 0)) }()
	select {
	case a := <-got:
		t.Fatalf("round 2 was fixed while 2 held rounds waited for a taker: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
	// Consumer 1 takes round 0 (still held: not dropped) and so makes room.
	if a := rs.take(ctx, 0, 1, fmt.Sprint("c", 1)); a.err != nil || a.skip || a.b.tokens != 1 {
		t.Fatalf("round 0 index 1 (held): %+v", a)
	}
	select {
	case a := <-got:
		if a.err != nil || a.skip || a.b.tokens != 20 {
			t.Fatalf("round 2 index 0: %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("round 2 not fixed after round 0 was taken completely")
	}
	if a := rs.take(ctx, 1, 1, fmt.Sprint("c", 1)); a.err != nil || a.skip || a.b.tokens != 11 {
		t.Fatalf("round 1 index 1 (held): %+v", a)
	}
	// A round waiting for room gives up with its context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	rs.take(ctx, 3, 0, fmt.Sprint("c", 0))
	if a := rs.take(cctx, 4, 0, fmt.Sprint("c", 0)); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("round 4 with rounds 2 and 3 held and a cancelled context: %+v", a)
	}
}

// TestRoundServerIdle: while the producer waits for splits with no window
// (exactly-once, between phases), a round that would wait for a window is
// fixed as not served, for every consumer; once it produces again, later
// rounds are served.
func TestRoundServerIdle(t *testing.T) {
	rs := newRoundServer(2, 2, 8)
	ctx := context.Background()
	waiting := make(chan roundAnswer, 1)
	go func() { waiting <- rs.take(ctx, 0, 0, fmt.Sprint("c", 0)) }() // waits for a window
	rs.setIdle(true)
	if a := <-waiting; !a.idle {
		t.Fatalf("round 0 asked before the producer went idle: %+v, want not served (idle)", a)
	}
	if a := rs.take(ctx, 0, 1, fmt.Sprint("c", 1)); !a.idle {
		t.Fatalf("round 0, the other consumer: %+v, want not served (idle), as the first", a)
	}
	if a := rs.take(ctx, 0, 1, "c1"); !a.idle {
		t.Fatalf("round 0 asked again by the same consumer (its stream broke): %+v, want not served (idle) again", a)
	}
	if a := rs.take(ctx, 0, 1, "c1-restarted"); !a.skip || a.idle {
		t.Fatalf("round 0 asked again by a new instance of the index: %+v, want skip (taken)", a)
	}
	rs.setIdle(false)
	rs.windows <- testWindow(3, 30, 31)
	for i := range 2 {
		if a := rs.take(ctx, 1, i, fmt.Sprint("c", i)); a.err != nil || a.skip || a.b.tokens != int64(30+i) {
			t.Fatalf("round 1 index %d after the producer resumed: %+v", i, a)
		}
	}
	// A window offered just before going idle is served, not skipped.
	rs.windows <- testWindow(4, 40, 41)
	rs.setIdle(true)
	if a := rs.take(ctx, 2, 0, fmt.Sprint("c", 0)); a.skip || a.idle || a.b.tokens != 40 {
		t.Fatalf("round 2 with a window ready while idle: %+v", a)
	}
}
