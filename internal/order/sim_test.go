package order

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// A simulation of a deterministic job built from the pure parts alone:
// workers lease windows first come, finish them in an order set by a
// random clock, commit their batch counts, route each global batch to its
// consumer, and each consumer reassembles its share under a position
// credit. It is the model the mesh's wiring must follow; the property is
// the design's: what every consumer returns is the reference sequence,
// whatever the number of workers and their timing, across a resume on
// another number of consumers.

type simSpec struct {
	n, block, window, seed uint64
	batch                  int
	filter                 bool // drop about a fifth of the elements: counts per window vary
}

const simEpoch = 3

func (s simSpec) layout(t *testing.T) Layout {
	l, err := NewLayout(s.n, s.block, s.window, s.seed, simEpoch)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// produce is what any worker makes of window w: its elements in window
// order, filtered, batched within the window (the last batch short).
func (s simSpec) produce(t *testing.T, l Layout, w uint64) [][]uint64 {
	ids, err := l.Window(w)
	if err != nil {
		t.Fatal(err)
	}
	var kept []uint64
	for _, id := range ids {
		if !s.filter || mix64(id^s.seed)%5 != 0 {
			kept = append(kept, id)
		}
	}
	var out [][]uint64
	for len(kept) > 0 {
		n := min(s.batch, len(kept))
		out = append(out, kept[:n:n])
		kept = kept[n:]
	}
	return out
}

// reference is the epoch's global batch sequence made window by window,
// and its numbering.
func (s simSpec) reference(t *testing.T) ([][]uint64, *Batches) {
	l := s.layout(t)
	nb := NewBatches()
	var g [][]uint64
	for w := range l.Windows() {
		bs := s.produce(t, l, w)
		if err := nb.Commit(w, uint64(len(bs))); err != nil {
			t.Fatal(err)
		}
		g = append(g, bs...)
	}
	return g, nb
}

type simRun struct {
	workers   int
	lookahead uint64 // windows leased ahead of the oldest window a consumer still needs
	credit    uint64 // positions a consumer grants ahead of its next
	clock     uint64 // the random timing's seed
	cut       Cut
	anchor    Anchor
	stopAt    []uint64 // per consumer: return this many of its share, then stop
}

type simOut struct {
	got     [][][]uint64 // per consumer, the batches it returned
	last    []Anchor     // per consumer, the anchor of its last batch's window
	digests []Digest
	peak    int // the largest reorder buffer seen
	dups    int // batches that arrived twice and were kept once
}

func simulate(t *testing.T, s simSpec, run simRun) simOut {
	t.Helper()
	l := s.layout(t)
	key := DigestKey(s.seed, simEpoch)
	rng := rand.New(rand.NewPCG(run.clock, 77))
	nb, err := NewBatchesFrom(run.anchor)
	if err != nil {
		t.Fatal(err)
	}
	n := run.cut.N
	out := simOut{got: make([][][]uint64, n), last: make([]Anchor, n), digests: make([]Digest, n)}
	for i := range out.last {
		out.last[i] = run.anchor
	}
	type held struct {
		batch []uint64
		a     Anchor
	}
	busy := make([]int64, run.workers) // window being produced, or -1
	for i := range busy {
		busy[i] = -1
	}
	done := map[uint64][][]uint64{}      // produced, not yet committed
	outbox := make([]map[uint64]held, n) // at the workers: routed, waiting for credit
	buffer := make([]map[uint64]held, n) // at the client: the reorder buffer
	next := make([]uint64, n)
	for i := range outbox {
		outbox[i], buffer[i] = map[uint64]held{}, map[uint64]held{}
	}
	lease := run.anchor.Window
	var redo []uint64 // windows whose worker died after sending: leased again
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			t.Fatal("simulation does not end")
		}
		type action struct{ kind, a int }
		var acts []action
		// The oldest window a consumer still needs: of the batch it needs
		// next, or the first not committed when that batch is not numbered.
		oldest := nb.Next()
		for i := range n {
			if next[i] >= run.stopAt[i] {
				continue
			}
			if g, err := run.cut.Nth(i, next[i]); err == nil {
				if w, _, ok := nb.Locate(g); ok {
					oldest = min(oldest, w)
				}
			}
		}
		for wk, w := range busy {
			if w < 0 && (len(redo) > 0 || lease < l.Windows() && lease < oldest+run.lookahead) {
				acts = append(acts, action{0, wk})
			}
			if w >= 0 {
				acts = append(acts, action{1, wk})
			}
		}
		for i := range n {
			if next[i] >= run.stopAt[i] {
				continue
			}
			if _, ok := buffer[i][next[i]]; ok {
				acts = append(acts, action{3, int(i)})
			}
			for k := range outbox[i] {
				if k < next[i]+run.credit {
					acts = append(acts, action{2, int(i)})
					break
				}
			}
		}
		if len(acts) == 0 {
			break
		}
		switch a := acts[rng.IntN(len(acts))]; a.kind {
		case 0: // an idle worker leases a dead worker's window, or the next
			if len(redo) > 0 {
				busy[a.a] = int64(redo[0])
				redo = redo[1:]
			} else {
				busy[a.a] = int64(lease)
				lease++
			}
		case 1: // a worker finishes its window; commits in window order
			w := uint64(busy[a.a])
			busy[a.a] = -1
			bs := s.produce(t, l, w)
			if w < nb.Next() {
				// Made again after its first worker died having sent it:
				// the same batches, routed again.
				for k, b := range bs {
					g, _ := nb.Global(w, uint64(k))
					if i, kk, ok := run.cut.Owner(g); ok {
						a, _ := nb.Anchor(w)
						outbox[i][kk] = held{b, a}
					}
				}
				continue
			}
			if rng.IntN(4) == 0 {
				redo = append(redo, w) // its worker dies after sending it
			}
			done[w] = bs
			for {
				w := nb.Next()
				bs, ok := done[w]
				if !ok {
					break
				}
				delete(done, w)
				if err := nb.Commit(w, uint64(len(bs))); err != nil {
					t.Fatal(err)
				}
				anchor, _ := nb.Anchor(w)
				for k, b := range bs {
					g, ok := nb.Global(w, uint64(k))
					if !ok {
						t.Fatalf("window %d batch %d not numbered after its commit", w, k)
					}
					if i, kk, ok := run.cut.Owner(g); ok {
						outbox[i][kk] = held{b, anchor}
					}
				}
			}
		case 2: // a worker sends a consumer batches within its credit, any order
			i := uint64(a.a)
			var ks []uint64
			for k := range outbox[i] {
				if k < next[i]+run.credit {
					ks = append(ks, k)
				}
			}
			slices.Sort(ks)
			k := ks[rng.IntN(len(ks))]
			h := outbox[i][k]
			delete(outbox[i], k)
			if _, have := buffer[i][k]; have || k < next[i] {
				// The client keeps one copy: it must be the same batch.
				if have && !reflect.DeepEqual(buffer[i][k].batch, h.batch) {
					t.Fatalf("batch %d of consumer %d arrived twice with other content", k, i)
				}
				out.dups++
				continue
			}
			buffer[i][k] = h
			out.peak = max(out.peak, len(buffer[i]))
		case 3: // the trainer takes its next batch
			i := uint64(a.a)
			h := buffer[i][next[i]]
			delete(buffer[i], next[i])
			out.got[i] = append(out.got[i], h.batch)
			out.last[i] = h.a
			for _, id := range h.batch {
				out.digests[i].Add(key, 0, id)
			}
			next[i]++
		}
	}
	return out
}

// expected is what consumer i of cut returns of the reference, up to stop.
func expected(t *testing.T, ref [][]uint64, cut Cut, i, stop uint64) [][]uint64 {
	var out [][]uint64
	for k := uint64(0); k < stop; k++ {
		g, err := cut.Nth(i, k)
		if err != nil {
			t.Fatal(err)
		}
		if g >= uint64(len(ref)) {
			break
		}
		out = append(out, ref[g])
	}
	return out
}

func all(n uint64) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = ^uint64(0)
	}
	return s
}

var simSpecs = []simSpec{
	{n: 5000, block: 64, window: 4, seed: 1, batch: 32},                // static counts
	{n: 5003, block: 50, window: 3, seed: 2, batch: 17, filter: true},  // counts vary, a short block
	{n: 777, block: 1000, window: 1, seed: 3, batch: 10, filter: true}, // one window
}

// TestSimulatedSameSequenceAnyCluster: 1, 2 and 5 workers under three
// timings, 1 and 3 consumers, with and without a skip, a quarter of the
// windows made twice (their worker died after sending them): every
// consumer returns exactly its share of the reference sequence, byte for
// byte, keeping one copy of a batch that arrives twice; the
// reorder buffer stays within the credit; the consumers' digests add up to
// the digest of every element of the batches not skipped, and a consumer
// that lost one element would not.
func TestSimulatedSameSequenceAnyCluster(t *testing.T) {
	peak, dups := 0, 0
	defer func() {
		if !t.Failed() && peak < 2 {
			t.Errorf("the reorder buffer never held more than %d batch: batches never arrived out of order", peak)
		}
		if !t.Failed() && dups == 0 {
			t.Error("no batch ever arrived twice: dead workers' windows made again are not exercised")
		}
		t.Logf("largest reorder buffer %d batches; %d batches arrived twice and were kept once", peak, dups)
	}()
	for si, s := range simSpecs {
		ref, _ := s.reference(t)
		for _, n := range []uint64{1, 3} {
			for _, skip := range []Gaps{{}, NewGaps(Range{5, 9})} {
				cut := Cut{N: n, Gaps: skip}
				var want Digest
				key := DigestKey(s.seed, simEpoch)
				for g, b := range ref {
					if !skip.Contains(uint64(g)) {
						for _, id := range b {
							want.Add(key, 0, id)
						}
					}
				}
				for _, workers := range []int{1, 2, 5} {
					for clock := range uint64(3) {
						run := simRun{workers: workers, lookahead: 4, credit: 3, clock: clock + 10*uint64(workers), cut: cut, stopAt: all(n)}
						o := simulate(t, s, run)
						var sum Digest
						for i := range n {
							if e := expected(t, ref, cut, i, ^uint64(0)); !reflect.DeepEqual(o.got[i], e) {
								t.Fatalf("spec %d N=%d workers=%d clock=%d: consumer %d returned %d batches, not its %d of the reference (or in another order)", si, n, workers, clock, i, len(o.got[i]), len(e))
							}
							sum = sum.Plus(o.digests[i])
						}
						peak = max(peak, o.peak)
						dups += o.dups
						if o.peak > int(run.credit) {
							t.Fatalf("reorder buffer reached %d batches, credit %d", o.peak, run.credit)
						}
						if sum != want {
							t.Fatalf("spec %d: consumers' digests add to %v, the epoch's batches to %v", si, sum, want)
						}
						// A consumer that lost one element.
						var lossy Digest
						for i := range n {
							for bi, b := range o.got[i] {
								for j, id := range b {
									if i == 0 && bi == len(o.got[i])/2 && j == 0 {
										continue
									}
									lossy.Add(key, 0, id)
								}
							}
						}
						if lossy == want {
							t.Fatal("the audit missed a dropped element")
						}
					}
				}
			}
		}
	}
}

// TestSimulatedResumeOnOtherConsumers: a run of N consumers on 2 workers
// stops mid-epoch with its consumers a step apart; their checkpoints
// (encoded and decoded) are merged and the job resumes on N' consumers and
// 5 workers, numbering from the checkpoints' anchor without producing the
// windows before it. The old and new consumers together return every
// batch of the reference once, the new ones in the uninterrupted order,
// and the digests carried in the checkpoints add up.
func TestSimulatedResumeOnOtherConsumers(t *testing.T) {
	for si, s := range simSpecs[:2] {
		ref, full := s.reference(t)
		for _, c := range []struct{ n, n2 uint64 }{{2, 3}, {3, 1}, {1, 2}, {4, 4}} {
			cut := Cut{N: c.n, Gaps: NewGaps(Range{40, 44})}
			stop := make([]uint64, c.n)
			for i := range stop {
				stop[i] = 20
				if uint64(i) >= c.n/2 {
					stop[i] = 21 // the last ranks a step ahead: gaps after the resume point
				}
			}
			o := simulate(t, s, simRun{workers: 2, lookahead: 3, credit: 4, clock: 5, cut: cut, stopAt: stop})
			var cks []Checkpoint
			var progress []ConsumerProgress
			for i := range c.n {
				ck := Checkpoint{Fingerprint: 9, Epoch: simEpoch, Consumers: c.n, Consumer: i, Next: uint64(len(o.got[i])),
					Skips: []Skip{{Epoch: simEpoch, Range: Range{40, 44}}}, Anchor: o.last[i], Digest: o.digests[i]}
				b, err := ck.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var back Checkpoint
				if err := back.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				cks = append(cks, back)
				progress = append(progress, ConsumerProgress{Index: back.Consumer, Next: back.Next})
			}
			merged, err := Merge(cks[0].Cut(), progress, c.n2, MaxAhead)
			if err != nil {
				t.Fatal(err)
			}
			ahead := 0
			for _, r := range merged.Gaps.Ranges() {
				if r.Lo >= 44 || r.Hi <= 40 {
					ahead++
				}
			}
			if c.n > 1 && ahead == 0 {
				t.Fatalf("%d→%d: no batches ahead of the resume point (gaps %v): the case is not exercised", c.n, c.n2, merged.Gaps.Ranges())
			}
			anchor := cks[0].Anchor
			var carried Digest
			for _, ck := range cks {
				if ck.Anchor.Window < anchor.Window {
					anchor = ck.Anchor
				}
				carried = carried.Plus(ck.Digest)
			}
			if fa, _ := full.Anchor(anchor.Window); fa != anchor {
				t.Fatalf("checkpoint anchor %+v, the reference numbers it %+v", anchor, fa)
			}
			o2 := simulate(t, s, simRun{workers: 5, lookahead: 4, credit: 2, clock: 6, cut: merged, anchor: anchor, stopAt: all(c.n2)})
			seen := make([]int, len(ref))
			count := func(cut Cut, i uint64, got [][]uint64) {
				for k, b := range got {
					g, _ := cut.Nth(i, uint64(k))
					if !reflect.DeepEqual(b, ref[g]) {
						t.Fatalf("spec %d %d→%d: a batch differs from the reference's %d", si, c.n, c.n2, g)
					}
					seen[g]++
				}
			}
			for i := range c.n {
				count(cut, i, o.got[i])
			}
			var after Digest
			for i := range c.n2 {
				count(merged, i, o2.got[i])
				after = after.Plus(o2.digests[i])
			}
			var want Digest
			key := DigestKey(s.seed, simEpoch)
			for g := range ref {
				wantSeen := 1
				if g >= 40 && g < 44 {
					wantSeen = 0
				} else {
					for _, id := range ref[g] {
						want.Add(key, 0, id)
					}
				}
				if seen[g] != wantSeen {
					t.Fatalf("spec %d %d→%d: global batch %d returned %d times, want %d", si, c.n, c.n2, g, seen[g], wantSeen)
				}
			}
			if carried.Plus(after) != want {
				t.Fatalf("spec %d %d→%d: digests before and after the resume do not add up to the epoch's", si, c.n, c.n2)
			}
		}
	}
}
