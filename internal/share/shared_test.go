package share

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

// source is a produce function over n items of a fixed size, then io.EOF;
// it counts its calls.
type source struct {
	n, size int64
	next    atomic.Int64
	calls   atomic.Int64
	active  atomic.Int32 // productions running now: must never exceed 1
	overlap atomic.Bool
}

func (s *source) produce(ctx context.Context) (item, error) {
	s.calls.Add(1)
	if s.active.Add(1) > 1 {
		s.overlap.Store(true)
	}
	defer s.active.Add(-1)
	// Give other readers the chance to run while this production is in
	// flight: they must wait for it, not start their own.
	for range 3 {
		runtime.Gosched()
	}
	seq := s.next.Load()
	if seq >= s.n {
		return item{}, io.EOF
	}
	s.next.Store(seq + 1)
	return item{seq: seq, size: s.size}, nil
}

func (s *Shared[T]) waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func join(t *testing.T, s *Shared[item], jobs ...string) {
	t.Helper()
	for _, j := range jobs {
		if err := s.Join(j); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads job until io.EOF and returns the sequence numbers.
func readAll(ctx context.Context, s *Shared[item], job string) ([]int64, error) {
	var seqs []int64
	for {
		it, err := s.Read(ctx, job)
		if err == io.EOF {
			return seqs, nil
		}
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, it.seq)
	}
}

func jobNames(k int) []string {
	jobs := make([]string, k)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("job%d", i)
	}
	return jobs
}

// TestSharedSameSpeed: 8 readers over N items cause N productions and every
// reader gets all N in order, both free-running with a window that holds
// them all and in lock step with a window of a single item.
func TestSharedSameSpeed(t *testing.T) {
	const k, n, size = 8, 500, 100
	t.Run("free running", func(t *testing.T) {
		src := &source{n: n, size: size}
		s := NewShared(Config{WindowBytes: n * size, MaxItems: n}, src.produce)
		jobs := jobNames(k)
		join(t, s, jobs...)
		got := make([][]int64, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for i, job := range jobs {
			wg.Go(func() { got[i], errs[i] = readAll(testutil.Ctx(t, 20*time.Second), s, job) })
		}
		wg.Wait()
		checkAllItems(t, s, src, jobs, got, errs, n)
	})
	t.Run("lock step, one-item window", func(t *testing.T) {
		src := &source{n: n, size: size}
		s := NewShared(Config{WindowBytes: size, MaxItems: 1}, src.produce)
		jobs := jobNames(k)
		join(t, s, jobs...)
		got := make([][]int64, k)
		errs := make([]error, k)
		arrived := make(chan struct{})
		release := make([]chan struct{}, n+1)
		for r := range release {
			release[r] = make(chan struct{})
		}
		var wg sync.WaitGroup
		for i, job := range jobs {
			wg.Go(func() {
				// Every reader arrives in every round, also after its
				// stream ended, so a failure cannot stall the others.
				ctx := testutil.Ctx(t, 20*time.Second)
				done := false
				for r := range release {
					<-release[r]
					if !done {
						it, err := s.Read(ctx, job)
						switch {
						case err == io.EOF:
							done = true
						case err != nil:
							errs[i], done = err, true
						default:
							got[i] = append(got[i], it.seq)
						}
					}
					arrived <- struct{}{}
				}
			})
		}
		for r := range release {
			close(release[r])
			for range k {
				<-arrived
			}
		}
		wg.Wait()
		checkAllItems(t, s, src, jobs, got, errs, n)
	})
}

func checkAllItems(t *testing.T, s *Shared[item], src *source, jobs []string, got [][]int64, errs []error, n int64) {
	t.Helper()
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i)
	}
	var produced, hits int64
	for i, job := range jobs {
		if errs[i] != nil {
			t.Fatalf("%s: %v", job, errs[i])
		}
		if !slices.Equal(got[i], want) {
			t.Fatalf("%s read %d items, not 0..%d in order", job, len(got[i]), n-1)
		}
		js, _ := s.JobStats(job)
		if js.Read != n || js.EvictedBeforeRead != 0 {
			t.Errorf("%s: %+v", job, js)
		}
		produced += js.Produced
		hits += js.Hits
	}
	// n items and the call that returned io.EOF.
	if c := src.calls.Load(); c != n+1 {
		t.Errorf("%d produce calls for %d items", c, n)
	}
	if produced != n || hits != n*int64(len(jobs)-1) {
		t.Errorf("jobs report %d productions and %d hits", produced, hits)
	}
	if src.overlap.Load() {
		t.Error("two productions ran at once")
	}
	if st := s.Stats(); st.Produced != n || st.Bytes > st.MaxBytes {
		t.Errorf("stats %+v", st)
	}
}

// TestSharedThrottledReader: with a small window, a reader that does not
// read does not hold back the others, which finish; it then finds that it
// lost the evicted items.
func TestSharedThrottledReader(t *testing.T) {
	const k, n, size = 8, 300, 100
	src := &source{n: n, size: size}
	s := NewShared(Config{WindowBytes: 4 * size, MaxItems: 64}, src.produce)
	jobs := jobNames(k)
	join(t, s, jobs...)
	ctx := testutil.Ctx(t, 20*time.Second)

	// The throttled reader reads one item per token until tokens is closed,
	// then freely.
	tokens := make(chan struct{})
	var slowGot []int64
	var slowErr error
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		for {
			<-tokens
			it, err := s.Read(ctx, jobs[0])
			if err != nil {
				if err != io.EOF {
					slowErr = err
				}
				return
			}
			slowGot = append(slowGot, it.seq)
		}
	}()
	tokens <- struct{}{} // it reads (produces) item 0, then blocks

	fast := jobs[1:]
	got := make([][]int64, len(fast))
	errs := make([]error, len(fast))
	var wg sync.WaitGroup
	for i, job := range fast {
		wg.Go(func() { got[i], errs[i] = readAll(ctx, s, job) })
	}
	wg.Wait() // they finish although the throttled reader never reads
	for i, job := range fast {
		if errs[i] != nil {
			t.Fatalf("%s: %v", job, errs[i])
		}
		js, _ := s.JobStats(job)
		if !increasing(got[i]) || js.Read+js.EvictedBeforeRead != n || got[i][len(got[i])-1] != n-1 {
			t.Fatalf("%s read %v, stats %+v", job, got[i], js)
		}
	}
	if c := src.calls.Load(); c != n+1 {
		t.Errorf("%d produce calls for %d items", c, n)
	}

	close(tokens) // let the throttled reader go
	<-slowDone
	if slowErr != nil {
		t.Fatal(slowErr)
	}
	js, _ := s.JobStats(jobs[0])
	if want := []int64{0, n - 4, n - 3, n - 2, n - 1}; !slices.Equal(slowGot, want) {
		t.Errorf("throttled reader read %v, want %v", slowGot, want)
	}
	if js.EvictedBeforeRead != n-5 || js.Read != 5 {
		t.Errorf("throttled reader stats %+v", js)
	}
	if st := s.Stats(); st.Bytes > 4*size || st.Evicted != n-4 {
		t.Errorf("stats %+v", st)
	}
}

func increasing(s []int64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

// gated is a produce function whose calls block until the test answers
// them, so a test controls exactly when a production ends and how.
type gated struct {
	calls   atomic.Int64
	answers chan result
}

type result struct {
	it  item
	err error
}

func newGated() *gated { return &gated{answers: make(chan result)} }

func (g *gated) produce(ctx context.Context) (item, error) {
	g.calls.Add(1)
	select {
	case r := <-g.answers:
		return r.it, r.err
	case <-ctx.Done():
		return item{}, ctx.Err()
	}
}

type readResult struct {
	it  item
	err error
}

func readAsync(ctx context.Context, s *Shared[item], job string) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		it, err := s.Read(ctx, job)
		ch <- readResult{it, err}
	}()
	return ch
}

func TestSharedProduceError(t *testing.T) {
	g := newGated()
	s := NewShared(DefaultConfig(), g.produce)
	join(t, s, "a", "b", "c", "d")
	ctx := testutil.Ctx(t, 20*time.Second)

	first := readAsync(ctx, s, "a")
	g.answers <- result{it: item{seq: 0, size: 1}}
	if r := <-first; r.err != nil || r.it.seq != 0 {
		t.Fatalf("first read: %+v", r)
	}
	for _, j := range []string{"b", "c"} {
		if it, err := s.Read(ctx, j); err != nil || it.seq != 0 {
			t.Fatalf("%s: %v %v", j, it, err)
		}
	}
	// a, b and c are at the front: one produces, two wait.
	var reads []<-chan readResult
	for _, j := range []string{"a", "b", "c"} {
		reads = append(reads, readAsync(ctx, s, j))
	}
	testutil.WaitFor(t, 10*time.Second, "two waiting readers", func() bool { return s.waiters() == 2 })
	boom := errors.New("boom")
	g.answers <- result{err: boom}
	for i, ch := range reads {
		if r := <-ch; !errors.Is(r.err, boom) {
			t.Errorf("reader %d: %+v, want the produce error", i, r)
		}
	}
	// The stream failed: later reads at the front fail without producing,
	// and d still gets the retained item first.
	if _, err := s.Read(ctx, "a"); !errors.Is(err, boom) {
		t.Errorf("later read: %v", err)
	}
	if it, err := s.Read(ctx, "d"); err != nil || it.seq != 0 {
		t.Errorf("d: %v %v", it, err)
	}
	if _, err := s.Read(ctx, "d"); !errors.Is(err, boom) {
		t.Errorf("d at the front: %v", err)
	}
	if c := g.calls.Load(); c != 2 {
		t.Errorf("%d produce calls", c)
	}
}

func TestSharedEOF(t *testing.T) {
	src := &source{n: 3, size: 10}
	s := NewShared(DefaultConfig(), src.produce)
	join(t, s, "a", "b")
	ctx := testutil.Ctx(t, 20*time.Second)
	for _, j := range []string{"a", "b"} {
		got, err := readAll(ctx, s, j)
		if err != nil || !slices.Equal(got, []int64{0, 1, 2}) {
			t.Fatalf("%s: %v %v", j, got, err)
		}
		if _, err := s.Read(ctx, j); err != io.EOF {
			t.Fatalf("%s after EOF: %v", j, err)
		}
	}
	join(t, s, "late")
	if got, err := readAll(ctx, s, "late"); err != nil || !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("late job: %v %v", got, err)
	}
	if c := src.calls.Load(); c != 4 {
		t.Errorf("%d produce calls: produce was called again after io.EOF", c)
	}
	if _, err := s.Read(ctx, "nobody"); !errors.Is(err, ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
}

func TestSharedWrappedEOF(t *testing.T) {
	s := NewShared(DefaultConfig(), func(context.Context) (item, error) {
		return item{}, fmt.Errorf("pipeline: %w", io.EOF)
	})
	join(t, s, "a")
	if _, err := s.Read(testutil.Ctx(t, 20*time.Second), "a"); err != io.EOF {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

func TestSharedCancelWaiter(t *testing.T) {
	g := newGated()
	s := NewShared(DefaultConfig(), g.produce)
	join(t, s, "a", "b")
	producer := readAsync(testutil.Ctx(t, 20*time.Second), s, "a")
	testutil.WaitFor(t, 10*time.Second, "a production", func() bool { return g.calls.Load() == 1 })
	ctx, cancel := context.WithCancel(testutil.Ctx(t, 20*time.Second))
	waiter := readAsync(ctx, s, "b")
	testutil.WaitFor(t, 10*time.Second, "a waiting reader", func() bool { return s.waiters() == 1 })
	cancel()
	if r := <-waiter; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %+v", r)
	}
	if js, _ := s.JobStats("b"); js.Position != 0 || js.Read != 0 {
		t.Fatalf("cancelled read moved b: %+v", js)
	}
	g.answers <- result{it: item{seq: 0, size: 1}}
	if r := <-producer; r.err != nil || r.it.seq != 0 {
		t.Fatalf("producer: %+v", r)
	}
	if it, err := s.Read(testutil.Ctx(t, 20*time.Second), "b"); err != nil || it.seq != 0 {
		t.Fatalf("b after cancelling: %v %v", it, err)
	}
	if c := g.calls.Load(); c != 1 {
		t.Errorf("%d produce calls", c)
	}
	// A cancelled context at the front does not start a production.
	dead, cancelDead := context.WithCancel(context.Background())
	cancelDead()
	if _, err := s.Read(dead, "a"); !errors.Is(err, context.Canceled) || g.calls.Load() != 1 {
		t.Errorf("read with a dead context: %v, %d calls", err, g.calls.Load())
	}
}

// TestSharedCancelProducer: when the producing reader gives up, a waiting
// reader takes over the production; the stream does not fail.
func TestSharedCancelProducer(t *testing.T) {
	g := newGated()
	s := NewShared(DefaultConfig(), g.produce)
	join(t, s, "a", "b")
	ctx, cancel := context.WithCancel(testutil.Ctx(t, 20*time.Second))
	producer := readAsync(ctx, s, "a")
	testutil.WaitFor(t, 10*time.Second, "a production", func() bool { return g.calls.Load() == 1 })
	waiter := readAsync(testutil.Ctx(t, 20*time.Second), s, "b")
	testutil.WaitFor(t, 10*time.Second, "a waiting reader", func() bool { return s.waiters() == 1 })
	cancel()
	if r := <-producer; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled producer: %+v", r)
	}
	testutil.WaitFor(t, 10*time.Second, "the second production", func() bool { return g.calls.Load() == 2 })
	g.answers <- result{it: item{seq: 0, size: 1}}
	if r := <-waiter; r.err != nil || r.it.seq != 0 {
		t.Fatalf("new producer: %+v", r)
	}
	if it, err := s.Read(testutil.Ctx(t, 20*time.Second), "a"); err != nil || it.seq != 0 {
		t.Fatalf("a after cancelling: %v %v", it, err)
	}
	a, _ := s.JobStats("a")
	b, _ := s.JobStats("b")
	if a.Hits != 1 || a.Produced != 0 || b.Produced != 1 {
		t.Errorf("stats a %+v b %+v", a, b)
	}
}

// TestSharedLeaveDuringProduction: the producer's job leaves while its
// production runs; a waiting job still gets the item, the leaver gets
// ErrUnknownJob, and with no one left the item is dropped.
func TestSharedLeaveDuringProduction(t *testing.T) {
	g := newGated()
	s := NewShared(DefaultConfig(), g.produce)
	join(t, s, "a", "b")
	ctx := testutil.Ctx(t, 20*time.Second)
	producer := readAsync(ctx, s, "a")
	testutil.WaitFor(t, 10*time.Second, "a production", func() bool { return g.calls.Load() == 1 })
	waiter := readAsync(ctx, s, "b")
	testutil.WaitFor(t, 10*time.Second, "a waiting reader", func() bool { return s.waiters() == 1 })
	s.Leave("a")
	g.answers <- result{it: item{seq: 0, size: 1}}
	if r := <-producer; !errors.Is(r.err, ErrUnknownJob) {
		t.Fatalf("producer that left: %+v", r)
	}
	if r := <-waiter; r.err != nil || r.it.seq != 0 {
		t.Fatalf("waiter: %+v", r)
	}

	producer = readAsync(ctx, s, "b")
	testutil.WaitFor(t, 10*time.Second, "a production", func() bool { return g.calls.Load() == 2 })
	s.Leave("b")
	g.answers <- result{it: item{seq: 1, size: 1}}
	if r := <-producer; !errors.Is(r.err, ErrUnknownJob) {
		t.Fatalf("producer that left: %+v", r)
	}
	if st := s.Stats(); st.Len != 0 || st.Bytes != 0 || st.Jobs != 0 || st.Produced != 1 {
		t.Errorf("after everyone left: %+v", st)
	}
}

func TestSharedLastLeaveReleases(t *testing.T) {
	src := &source{n: 10, size: 1000}
	s := NewShared(DefaultConfig(), src.produce)
	join(t, s, "a", "b")
	for range 5 {
		if _, err := s.Read(testutil.Ctx(t, 20*time.Second), "a"); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Bytes != 5000 {
		t.Fatalf("stats %+v", st)
	}
	s.Leave("a")
	if st := s.Stats(); st.Bytes != 5000 {
		t.Fatalf("b still needs the items: %+v", st)
	}
	s.Leave("b")
	if st := s.Stats(); st.Bytes != 0 || st.Len != 0 || st.Released != 5 {
		t.Fatalf("after the last leave: %+v", st)
	}
	if _, err := s.Read(testutil.Ctx(t, 20*time.Second), "a"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("read after leave: %v", err)
	}
	if jobs := s.Jobs(); len(jobs) != 0 {
		t.Fatalf("jobs %v", jobs)
	}
}

func TestSharedItemTooLarge(t *testing.T) {
	calls := 0
	s := NewShared(Config{WindowBytes: 100, MaxItems: 10}, func(context.Context) (item, error) {
		calls++
		return item{size: 101}, nil
	})
	join(t, s, "a", "b")
	for _, j := range []string{"a", "b"} {
		_, err := s.Read(testutil.Ctx(t, 20*time.Second), j)
		if !errors.Is(err, ErrItemTooLarge) || !strings.Contains(err.Error(), "101") {
			t.Fatalf("%s: %v", j, err)
		}
	}
	if calls != 1 {
		t.Errorf("%d produce calls", calls)
	}
}

func TestSharedProducePanics(t *testing.T) {
	s := NewShared(DefaultConfig(), func(context.Context) (item, error) { panic("pipeline bug") })
	join(t, s, "a")
	if _, err := s.Read(testutil.Ctx(t, 20*time.Second), "a"); err == nil || !strings.Contains(err.Error(), "pipeline bug") {
		t.Fatalf("err = %v", err)
	}
}

func TestSharedBadConfig(t *testing.T) {
	s := NewShared(Config{WindowBytes: 0, MaxItems: 1}, (&source{}).produce)
	if err := s.Join("a"); err == nil || !strings.Contains(err.Error(), "WindowBytes") {
		t.Fatalf("Join: %v", err)
	}
	if _, err := s.Read(testutil.Ctx(t, 20*time.Second), "a"); err == nil {
		t.Fatal("Read succeeded with a bad config")
	}
	if err := NewShared[item](DefaultConfig(), nil).Join("a"); err == nil {
		t.Fatal("Join succeeded without a produce function")
	}
	if err := NewShared(DefaultConfig(), (&source{}).produce).Join(""); err != nil {
		t.Fatalf("empty job name: %v", err)
	}
}

func TestSharedJoinTwice(t *testing.T) {
	s := NewShared(DefaultConfig(), (&source{}).produce)
	join(t, s, "a")
	if err := s.Join("a"); !errors.Is(err, ErrJobExists) {
		t.Fatalf("err = %v", err)
	}
}
