package splits

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/ranges"
)

// elem is one source element of one epoch.
type elem struct{ e, s, i int64 }

// kept is the stand-in for a filter: the elements a pipeline emits.
func kept(s, i int64) bool { return (s*7+i*13)%5 != 0 }

const simSplitSize = 6

// simWorker is a worker of the simulation: leased splits it reads, and an
// outbox of emitted elements its consumers take from.
type simWorker struct {
	name   string
	leases []simLease
	outbox []elem
	dead   bool // killed: sends nothing more
	exp    bool // expired by the cluster (maybe still alive: a pause)
}

type simLease struct {
	e, s    int64
	exclude ranges.Set
	next    int64 // next index to read
	emitted ranges.Set
	census  bool // run to count, not to deliver (census.go)
}

type simConsumer struct {
	name    string
	got     map[elem]int
	pending map[[2]int64]ranges.Set // receipts not sent yet
	fenced  map[string]bool         // workers it dropped (and fenced)
}

// TestExactlyOnceSimulation drives a DynamicState through random
// interleavings of leases, emissions, deliveries, receipts, worker deaths
// and pauses, and fences, and checks that every kept element of every
// epoch reaches the consumers exactly once.
func TestExactlyOnceSimulation(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed, false) })
	}
}

// TestCensusSimulation is the same simulation for an at-most-once job
// with a count (census.go): no element is delivered twice, and the loss
// the state counts equals the kept elements no consumer got, exactly.
func TestCensusSimulation(t *testing.T) {
	lossy := 0
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if simulate(t, seed, true) > 0 {
				lossy++
			}
		})
	}
	if lossy < 30 {
		t.Fatalf("only %d of 300 runs lost anything: the simulation does not exercise the count", lossy)
	}
}

// simulate runs one simulation and returns the elements lost (census).
func simulate(t *testing.T, seed uint64, census bool) (lost int64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	numSplits, epochs := int64(1+rng.IntN(12)), int64(1+rng.IntN(3))
	d := NewDynamicExactlyOnce(numSplits, epochs)
	if census {
		d = NewDynamicCounted(numSplits, epochs)
	}
	var workers []*simWorker
	addWorker := func() {
		workers = append(workers, &simWorker{name: fmt.Sprintf("w%d", len(workers))})
	}
	for range 1 + rng.IntN(3) {
		addWorker()
	}
	consumers := []*simConsumer{}
	for i := range 1 + rng.IntN(2) {
		consumers = append(consumers, &simConsumer{name: fmt.Sprintf("c%d", i), got: map[elem]int{}, pending: map[[2]int64]ranges.Set{}, fenced: map[string]bool{}})
	}
	names := func() []string {
		var ns []string
		for _, c := range consumers {
			ns = append(ns, c.name)
		}
		return ns
	}
	check := func(what string) {
		t.Helper()
		if err := d.Validate(); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
		c := d.Clone()
		if err := c.Validate(); err != nil {
			t.Fatalf("clone after %s: %v", what, err)
		}
	}
	flush := func(c *simConsumer) {
		for _, k := range slices.SortedFunc(mapKeys(c.pending), func(a, b [2]int64) int {
			if a[0] != b[0] {
				return int(a[0] - b[0])
			}
			return int(a[1] - b[1])
		}) {
			if err := d.Receive(c.name, k[0], k[1], c.pending[k]); err != nil {
				t.Fatalf("receive %v: %v", k, err)
			}
		}
		c.pending = map[[2]int64]ranges.Set{}
	}
	kills := 0
	var reqID uint64
	for step := 0; step < 20000 && !d.Complete(); step++ {
		switch r := rng.IntN(100); {
		case r < 3: // a live worker drains: hands back the leases it has not started
			w := workers[rng.IntN(len(workers))]
			if w.dead || w.exp || len(w.leases) == 0 {
				continue
			}
			e := w.leases[len(w.leases)-1].e
			var ids []int64
			keep := w.leases[:0]
			for _, l := range w.leases {
				if l.next == 0 && l.e == e {
					ids = append(ids, l.s)
				} else {
					keep = append(keep, l)
				}
			}
			if err := d.HandBack(w.name, e, ids); err != nil {
				t.Fatalf("hand back %v of epoch %d: %v", ids, e, err)
			}
			w.leases = keep
			check("hand back")
		case r < 25: // a live worker leases
			w := workers[rng.IntN(len(workers))]
			if w.dead || w.exp || len(w.leases) > 2 {
				continue
			}
			reqID++
			l := d.LeasePreferring(w.name, reqID, 1+rng.IntN(3), preferOf(rng.Uint64(), numSplits))
			for i, s := range l.Splits {
				var ex ranges.Set
				if l.Exclude != nil {
					ex = l.Exclude[i]
				}
				if l.Census && !census {
					t.Fatalf("a census lease in an exactly-once job: %+v", l)
				}
				w.leases = append(w.leases, simLease{e: l.Epoch, s: s, exclude: ex, census: l.Census})
			}
			check("lease")
		case r < 55: // a worker (alive, maybe expired but paused) reads an element
			w := workers[rng.IntN(len(workers))]
			if w.dead || len(w.leases) == 0 {
				continue
			}
			l := &w.leases[0]
			if l.next < simSplitSize {
				i := l.next
				l.next++
				if !l.exclude.Contains(i) && kept(l.s, i) {
					if !l.census {
						w.outbox = append(w.outbox, elem{l.e, l.s, i})
					}
					l.emitted.Add(i)
				}
				continue
			}
			err := d.Produce(w.name, l.e, []ranges.SplitEmitted{{Split: l.s, Emitted: l.emitted}})
			if w.exp {
				if err == nil {
					t.Fatalf("an expired worker produced split %d", l.s)
				}
			} else if err != nil {
				t.Fatalf("produce: %v", err)
			}
			w.leases = w.leases[1:]
			check("produce")
		case r < 80: // a consumer takes an element from a worker it still reads
			c := consumers[rng.IntN(len(consumers))]
			w := workers[rng.IntN(len(workers))]
			if w.dead || c.fenced[w.name] || len(w.outbox) == 0 {
				continue
			}
			x := w.outbox[0]
			w.outbox = w.outbox[1:]
			c.got[x]++
			k := [2]int64{x.e, x.s}
			rs := c.pending[k]
			rs.Add(x.i)
			c.pending[k] = rs
		case r < 90: // a consumer sends its receipts
			flush(consumers[rng.IntN(len(consumers))])
			check("receive")
		case r < 95: // a consumer notices an expired worker: drops and fences it
			c := consumers[rng.IntN(len(consumers))]
			for _, w := range workers {
				if w.exp && !c.fenced[w.name] {
					flush(c)
					c.fenced[w.name] = true
					d.Fence(c.name, w.name)
					check("fence")
					break
				}
			}
		default: // a worker is expired: killed, or paused (it may still send)
			if kills >= 3 {
				continue
			}
			w := workers[rng.IntN(len(workers))]
			if w.exp {
				continue
			}
			kills++
			w.exp = true
			w.dead = rng.IntN(2) == 0
			d.ExpireWorker(w.name, names())
			addWorker()
			check("expire")
		}
		// Keep receipts and fences flowing so the job can complete.
		if step > 15000 {
			for _, c := range consumers {
				flush(c)
				for _, w := range workers {
					if w.exp && !c.fenced[w.name] {
						c.fenced[w.name] = true
						d.Fence(c.name, w.name)
					}
				}
			}
		}
	}
	if !d.Complete() {
		t.Fatalf("not complete: %+v %+v", d.Progress(), d.Progress().Exact)
	}
	total := map[elem]int{}
	for _, c := range consumers {
		for x, n := range c.got {
			total[x] += n
		}
	}
	var missing int64
	for e := range epochs {
		for s := range numSplits {
			for i := range int64(simSplitSize) {
				x := elem{e, s, i}
				want := 0
				if kept(s, i) {
					want = 1
				}
				if census && want == 1 && total[x] == 0 {
					missing++
					continue
				}
				if total[x] != want {
					t.Fatalf("element %+v delivered %d times, want %d (kills %d)", x, total[x], want, kills)
				}
			}
		}
	}
	p := d.Progress().Exact
	if p.Duplicates != 0 || p.Abandoned != 0 || p.Lost != missing {
		t.Fatalf("counts %+v; %d elements missing (kills %d)", p, missing, kills)
	}
	if census && (p.Requeued != 0 || d.Total.Lost == 0 && missing > 0) {
		t.Fatalf("census: counts %+v, %d splits lost, %d elements missing", p, d.Total.Lost, missing)
	}
	return missing
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestExactlyOnceFenceGatesRelease: a dead worker's split is not leased
// again until every consumer attached at its expiry has fenced it, and the
// re-lease excludes what the receipts say was delivered.
func TestExactlyOnceFenceGatesRelease(t *testing.T) {
	d := NewDynamicExactlyOnce(2, 1)
	if l := d.Lease("w1", 1, 1); len(l.Splits) != 1 || l.Splits[0] != 0 {
		t.Fatalf("lease: %+v", l)
	}
	if err := d.Receive("c1", 0, 0, ranges.Span(0, 3)); err != nil {
		t.Fatal(err)
	}
	if n := d.ExpireWorker("w1", []string{"c2", "c1"}); n != 1 {
		t.Fatalf("orphaned %d, want 1", n)
	}
	// Not yet: c1 and c2 must fence w1 first; w2 gets the next fresh split.
	if l := d.Lease("w2", 1, 5); len(l.Splits) != 1 || l.Splits[0] != 1 || l.Exclude != nil {
		t.Fatalf("lease before fences: %+v", l)
	}
	d.Fence("c1", "w1")
	if l := d.Lease("w2", 2, 5); len(l.Splits) != 0 || !l.Done || l.AllProduced {
		t.Fatalf("lease with one fence missing: %+v", l)
	}
	// c2 got elements 3 and 4 from w1 after c1's fence, before its own.
	if err := d.Receive("c2", 0, 0, ranges.Span(3, 5)); err != nil {
		t.Fatal(err)
	}
	d.Fence("c2", "w1")
	l := d.Lease("w2", 3, 5)
	if len(l.Splits) != 1 || l.Splits[0] != 0 || l.Epoch != 0 || len(l.Exclude) != 1 || l.Exclude[0].String() != "[0,5)" {
		t.Fatalf("re-lease: %+v", l)
	}
	if err := d.Produce("w2", 0, []ranges.SplitEmitted{{Split: 1, Emitted: ranges.Span(0, 4)}, {Split: 0, Emitted: ranges.Span(5, 8)}}); err != nil {
		t.Fatal(err)
	}
	if d.Complete() {
		t.Fatal("complete before the receipts")
	}
	if err := d.Receive("c1", 0, 0, ranges.Span(5, 8)); err != nil {
		t.Fatal(err)
	}
	if err := d.Receive("c1", 0, 1, ranges.Span(0, 4)); err != nil {
		t.Fatal(err)
	}
	if !d.Complete() {
		t.Fatalf("not complete: %+v", d.Progress())
	}
	if p := d.Progress(); p.Total.Finished != 2 || p.Total.Leased != 2 || p.Exact.Requeued != 1 || p.Exact.Delivered != 12 || p.Exact.Duplicates != 0 {
		t.Fatalf("progress %+v exact %+v", p, p.Exact)
	}
	// A receipt of a settled split counts as a duplicate.
	if err := d.Receive("c1", 0, 0, ranges.Span(0, 1)); err != nil || d.Progress().Exact.Duplicates != 1 {
		t.Fatalf("late duplicate: %v, %+v", err, d.Progress().Exact)
	}
	if err := d.Receive("c1", 0, 2, ranges.Span(0, 1)); err == nil {
		t.Fatal("receipt of a split that does not exist accepted")
	}
}

// TestExactlyOnceDeparture: a consumer that leaves settles what is
// produced, makes leased splits settle when produced, and what no
// remaining consumer receipts is counted abandoned, exactly.
func TestExactlyOnceDeparture(t *testing.T) {
	d := NewDynamicExactlyOnce(2, 1)
	d.Lease("w1", 1, 2)
	if err := d.Produce("w1", 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Span(0, 10)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Receive("c1", 0, 0, ranges.Span(0, 4)); err != nil {
		t.Fatal(err)
	}
	d.Depart("c2")
	if got := d.Progress().Exact.Abandoned; got != 6 {
		t.Fatalf("abandoned %d, want 6", got)
	}
	// Elements 4..5 were on their way to c1: its late receipt takes them back.
	if err := d.Receive("c1", 0, 0, ranges.Span(4, 6)); err != nil {
		t.Fatal(err)
	}
	if err := d.Produce("w1", 0, []ranges.SplitEmitted{{Split: 1, Emitted: ranges.Span(0, 10)}}); err != nil {
		t.Fatal(err)
	}
	if !d.Complete() {
		t.Fatalf("not complete: %+v", d.Progress())
	}
	if got := d.Progress().Exact.Abandoned; got != 4+10 {
		t.Fatalf("abandoned %d, want 14", got)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestExactlyOnceModeErrors: each mode refuses the other's calls.
func TestExactlyOnceModeErrors(t *testing.T) {
	a, x := NewDynamic(1, 1), NewDynamicExactlyOnce(1, 1)
	a.Lease("w", 1, 1)
	x.Lease("w", 1, 1)
	if err := a.Produce("w", 0, []ranges.SplitEmitted{{Split: 0}}); err == nil {
		t.Error("Produce on at-most-once accepted")
	}
	if err := a.Receive("c", 0, 0, ranges.Span(0, 1)); err == nil {
		t.Error("Receive on at-most-once accepted")
	}
	if err := x.Finish("w", 0, []int64{0}); err == nil {
		t.Error("Finish on exactly-once accepted")
	}
	if err := x.Produce("v", 0, []ranges.SplitEmitted{{Split: 0}}); err == nil {
		t.Error("Produce by a worker not holding the split accepted")
	}
	if err := x.Produce("w", 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Set{3, 1}}}); err == nil {
		t.Error("Produce with invalid ranges accepted")
	}
}
