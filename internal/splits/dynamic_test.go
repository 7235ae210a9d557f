package splits

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/fxamacker/cbor/v2"
)

func mustValid(t testing.TB, d *DynamicState) {
	t.Helper()
	if err := d.Validate(); err != nil {
		t.Fatalf("invariant broken: %v\n%+v", err, d)
	}
}

// TestDynamicLeaseTable walks one small job through two epochs.
func TestDynamicLeaseTable(t *testing.T) {
	d := NewDynamic(5, 2)
	steps := []struct {
		worker string
		req    uint64
		n      int
		want   Lease
	}{
		{"a", 1, 2, Lease{Epoch: 0, Splits: []int64{0, 1}}},
		{"b", 1, 2, Lease{Epoch: 0, Splits: []int64{2, 3}}},
		{"a", 2, 4, Lease{Epoch: 0, Splits: []int64{4}}}, // one lease never spans epochs
		{"b", 2, 0, Lease{Epoch: 1, Splits: []int64{0}}}, // n < 1 counts as 1; epoch advanced before 0..4 finished
		{"b", 2, 9, Lease{Epoch: 1, Splits: []int64{0}}}, // retry: same answer, n ignored
		{"a", 3, 3, Lease{Epoch: 1, Splits: []int64{1, 2, 3}}},
		{"c", 1, 3, Lease{Epoch: 1, Splits: []int64{4}, Done: true}},
		{"c", 2, 3, Lease{Epoch: 1, Done: true}},
		{"a", 3, 3, Lease{Epoch: 1, Splits: []int64{1, 2, 3}}}, // a's last request is still answered
	}
	for i, st := range steps {
		got := d.Lease(st.worker, st.req, st.n)
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("step %d: %s req %d n %d: got %+v, want %+v", i, st.worker, st.req, st.n, got, st.want)
		}
		mustValid(t, d)
	}
	p := d.Progress()
	want := Progress{NumSplits: 5, Epochs: 2, Epoch: 1, Total: Counts{Leased: 10}, Current: Counts{Leased: 5},
		Outstanding: 10, Done: true}
	if p != want {
		t.Fatalf("progress %+v, want %+v", p, want)
	}
	if err := d.Finish("a", 0, []int64{0, 1, 4}); err != nil {
		t.Fatal(err)
	}
	if lost := d.Expire("b"); !slices.Equal(lost, []int64{2, 3, 0}) { // epoch 0: 2, 3; epoch 1: 0
		t.Fatalf("lost %v", lost)
	}
	if _, ok := d.PerEpoch[0]; ok {
		t.Fatal("epoch 0 counts kept after its last lease ended")
	}
	if err := d.Finish("a", 1, []int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := d.Finish("c", 1, []int64{4}); err != nil {
		t.Fatal(err)
	}
	p = d.Progress()
	want = Progress{NumSplits: 5, Epochs: 2, Epoch: 1, Total: Counts{Leased: 10, Finished: 7, Lost: 3},
		Current: Counts{Leased: 5, Finished: 4, Lost: 1}, Done: true, Complete: true}
	if p != want {
		t.Fatalf("final progress %+v, want %+v", p, want)
	}
	mustValid(t, d)
}

func TestDynamicRemaining(t *testing.T) {
	d := NewDynamic(10, 3)
	d.Lease("a", 1, 4)
	if p := d.Progress(); p.RemainingInEpoch != 6 || p.Remaining != 26 || p.Done {
		t.Fatalf("progress %+v", p)
	}
	f := NewDynamic(10, 0)
	for i := range 25 {
		l := f.Lease("a", uint64(i+1), 4)
		if l.Done || len(l.Splits) == 0 {
			t.Fatalf("forever job: lease %d = %+v", i, l)
		}
	}
	if p := f.Progress(); p.Remaining != -1 || p.Epoch < 8 || p.Done {
		t.Fatalf("forever progress %+v", p)
	}
	mustValid(t, f)
	for _, epochs := range []int64{0, 1, 5} {
		z := NewDynamic(0, epochs)
		if l := z.Lease("a", 1, 5); !l.Done || len(l.Splits) != 0 {
			t.Fatalf("zero splits, %d epochs: %+v", epochs, l)
		}
		if p := z.Progress(); !p.Complete || p.Remaining != 0 {
			t.Fatalf("zero splits progress %+v", p)
		}
		mustValid(t, z)
	}
	if c := NewDynamic(-1, -1); c.NumSplits != 0 || c.Epochs != 0 {
		t.Fatalf("negative arguments not clamped: %+v", c)
	}
	if c := NewDynamic(MaxSplits+1, jobspec.MaxEpochs+1); c.NumSplits != MaxSplits || c.Epochs != jobspec.MaxEpochs {
		t.Fatalf("large arguments not clamped: %+v", c)
	}
	if l := NewDynamic(MaxLease*4, 1).Lease("a", 1, MaxLease*2); len(l.Splits) != MaxLease {
		t.Fatalf("lease of %d splits above MaxLease", len(l.Splits))
	}
}

func TestDynamicIdempotentRetry(t *testing.T) {
	d := NewDynamic(100, 1)
	first := d.Lease("a", 7, 10)
	other := d.Lease("b", 7, 10) // same id, other worker: a new lease
	before := d.Clone()
	again := d.Lease("a", 7, 10)
	if !reflect.DeepEqual(first, again) || !reflect.DeepEqual(d, before) {
		t.Fatalf("retry changed something: %+v vs %+v", first, again)
	}
	again.Splits[0] = 99 // the caller's copy is its own
	if d.LastLease["a"].Lease.Splits[0] != first.Splits[0] {
		t.Fatal("returned lease aliases the record")
	}
	if slices.Equal(first.Splits, other.Splits) {
		t.Fatal("two workers got the same splits")
	}
	// Request id 0 is never a retry.
	z1, z2 := d.Lease("c", 0, 1), d.Lease("c", 0, 1)
	if slices.Equal(z1.Splits, z2.Splits) {
		t.Fatalf("request id 0 treated as a retry: %v", z1.Splits)
	}
	// A new id after an older one: new splits.
	if next := d.Lease("a", 8, 10); slices.Equal(next.Splits, first.Splits) {
		t.Fatal("new request id returned the old lease")
	}
	// After Expire the record is gone: the same id gets new splits.
	d.Expire("b")
	if l := d.Lease("b", 7, 10); slices.Equal(l.Splits, other.Splits) {
		t.Fatal("expired worker's retry returned its lost splits")
	}
	mustValid(t, d)
}

func TestDynamicFinishErrors(t *testing.T) {
	d := NewDynamic(20, 2)
	d.Lease("a", 1, 5) // 0..4
	d.Lease("b", 1, 5) // 5..9
	d.Expire("b")
	cases := []struct {
		name   string
		worker string
		epoch  int64
		ids    []int64
		sentin error
	}{
		{"never leased", "a", 0, []int64{15}, ErrNotLeased},
		{"other worker's", "a", 0, []int64{0, 5}, ErrNotLeased},
		{"lost", "b", 0, []int64{5}, ErrNotLeased},
		{"wrong epoch", "a", 1, []int64{0}, ErrNotLeased},
		{"negative", "a", 0, []int64{-1}, ErrNotLeased},
		{"duplicate", "a", 0, []int64{1, 1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := d.Clone()
			err := d.Finish(tc.worker, tc.epoch, tc.ids)
			if err == nil || (tc.sentin != nil && !errors.Is(err, tc.sentin)) {
				t.Fatalf("err = %v, want %v", err, tc.sentin)
			}
			if !reflect.DeepEqual(d, before) {
				t.Fatal("failed Finish changed the state")
			}
		})
	}
	if err := d.Finish("a", 0, nil); err != nil {
		t.Fatalf("empty finish: %v", err)
	}
	if err := d.Finish("a", 0, []int64{4, 0, 2}); err != nil {
		t.Fatal(err)
	}
	if err := d.Finish("a", 0, []int64{2}); !errors.Is(err, ErrNotLeased) {
		t.Fatalf("second finish: %v", err)
	}
	mustValid(t, d)
}

func TestDynamicCBORRoundTrip(t *testing.T) {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	d := NewDynamic(37, 4)
	sim := newSim(d, 4)
	for range 200 {
		sim.step(t, r.Uint32(), true)
	}
	b1, err := enc.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got DynamicState
	if err := cbor.Unmarshal(b1, &got); err != nil {
		t.Fatal(err)
	}
	mustValid(t, &got)
	if !reflect.DeepEqual(&got, d) {
		t.Fatalf("round trip differs:\n%+v\n%+v", got, d)
	}
	b2, _ := enc.Marshal(d.Clone())
	if string(b1) != string(b2) {
		t.Fatal("encoding of a clone differs")
	}
}

// sim drives a DynamicState with a model of what each worker holds, and
// checks the properties after every step.
type sim struct {
	d       *DynamicState
	workers []string
	reqs    map[string]uint64
	last    map[string]Lease
	held    map[string]map[[2]int64]bool // worker → (epoch, split)
	leased  map[int64]map[int64]int      // epoch → split → times handed out
	back    map[[2]int64]bool            // handed back, not leased again
	lost    int64
}

func newSim(d *DynamicState, nWorkers int) *sim {
	s := &sim{d: d, reqs: map[string]uint64{}, last: map[string]Lease{},
		held: map[string]map[[2]int64]bool{}, leased: map[int64]map[int64]int{}, back: map[[2]int64]bool{}}
	for i := range nWorkers {
		w := fmt.Sprintf("w%d", i)
		s.workers = append(s.workers, w)
		s.held[w] = map[[2]int64]bool{}
	}
	return s
}

// step performs one operation chosen by op: a lease (sometimes a retry),
// a finish of part of what a worker holds, or (if expire) an expiry.
func (s *sim) step(t testing.TB, op uint32, expire bool) {
	t.Helper()
	w := s.workers[int(op>>8)%len(s.workers)]
	arg := int(op >> 16)
	switch kind := op % 10; {
	case kind < 5:
		if _, ok := s.last[w]; kind == 0 && ok { // retry: must return the same lease, change nothing
			before := s.d.Clone()
			got := s.d.Lease(w, s.reqs[w], arg%20)
			if !reflect.DeepEqual(got, s.last[w]) || !reflect.DeepEqual(before, s.d) {
				t.Fatalf("retry of %s req %d: %+v, first %+v", w, s.reqs[w], got, s.last[w])
			}
			return
		}
		s.reqs[w]++
		l := s.d.LeasePreferring(w, s.reqs[w], arg%20, preferOf(uint64(op), s.d.NumSplits))
		s.last[w] = l.Clone()
		if s.leased[l.Epoch] == nil {
			s.leased[l.Epoch] = map[int64]int{}
		}
		for _, sp := range l.Splits {
			key := [2]int64{l.Epoch, sp}
			if s.back[key] {
				delete(s.back, key) // handed back unread: leased again
			} else {
				s.leased[l.Epoch][sp]++
			}
			if s.leased[l.Epoch][sp] > 1 {
				t.Fatalf("split %d of epoch %d handed out twice", sp, l.Epoch)
			}
			s.held[w][key] = true
		}
		if l.Done && len(s.back) > 0 {
			t.Fatalf("lease says done with %d splits handed back and not leased again", len(s.back))
		}
	case kind < 9:
		s.finishSome(t, w, arg)
	default:
		if !expire {
			s.finishSome(t, w, arg)
			return
		}
		if arg%2 == 0 {
			s.handBack(t, w)
			break
		}
		lost := s.d.Expire(w)
		if len(lost) != len(s.held[w]) {
			t.Fatalf("expire %s: lost %d, held %d", w, len(lost), len(s.held[w]))
		}
		s.lost += int64(len(lost))
		s.held[w] = map[[2]int64]bool{}
		s.reqs[w] += 1000 // a restarted worker numbers anew
		delete(s.last, w)
	}
	s.check(t)
}

// handBack hands back w's splits of its newest held epoch (a drain):
// refused only once everything is handed out.
func (s *sim) handBack(t testing.TB, w string) {
	t.Helper()
	var epoch int64 = -1
	for key := range s.held[w] {
		epoch = max(epoch, key[0])
	}
	if epoch < 0 {
		return
	}
	var ids []int64
	for key := range s.held[w] {
		if key[0] == epoch {
			ids = append(ids, key[1])
		}
	}
	wasDone := s.d.done()
	err := s.d.HandBack(w, epoch, ids)
	if wasDone {
		if !errors.Is(err, ErrHandBackRefused) {
			t.Fatalf("hand back after everything was handed out: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("hand back %s epoch %d %v: %v", w, epoch, ids, err)
	}
	for _, id := range ids {
		delete(s.held[w], [2]int64{epoch, id})
		s.back[[2]int64{epoch, id}] = true
	}
}

// finishSome finishes up to k of w's splits of its oldest held epoch.
func (s *sim) finishSome(t testing.TB, w string, k int) {
	t.Helper()
	var keys [][2]int64
	for key := range s.held[w] {
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return
	}
	slices.SortFunc(keys, func(a, b [2]int64) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	epoch := keys[0][0]
	var ids []int64
	for _, key := range keys {
		if key[0] == epoch && len(ids) <= k%8 {
			ids = append(ids, key[1])
		}
	}
	if err := s.d.Finish(w, epoch, ids); err != nil {
		t.Fatalf("finish %s epoch %d %v: %v", w, epoch, ids, err)
	}
	for _, id := range ids {
		delete(s.held[w], [2]int64{epoch, id})
	}
}

func (s *sim) check(t testing.TB) {
	t.Helper()
	mustValid(t, s.d)
	var held int64
	for _, h := range s.held {
		held += int64(len(h))
	}
	p := s.d.Progress()
	if p.Outstanding != held || p.Total.Lost != s.lost || p.Waiting != int64(len(s.back)) ||
		p.Total.Leased != p.Total.Finished+p.Total.Lost+p.Outstanding+p.Waiting {
		t.Fatalf("progress %+v; model holds %d, lost %d", p, held, s.lost)
	}
}

// drain leases and finishes until the job is complete.
func (s *sim) drain(t testing.TB) {
	t.Helper()
	for i := 0; !s.d.Progress().Complete; i++ {
		if i > 1<<20 {
			t.Fatal("job never completes")
		}
		w := s.workers[i%len(s.workers)]
		s.reqs[w]++
		l := s.d.Lease(w, s.reqs[w], 1+i%7)
		for _, sp := range l.Splits {
			s.leased[l.Epoch] = mapOr(s.leased[l.Epoch])
			if key := [2]int64{l.Epoch, sp}; s.back[key] {
				delete(s.back, key)
				continue
			}
			s.leased[l.Epoch][sp]++
		}
		if err := s.d.Finish(w, l.Epoch, l.Splits); err != nil {
			t.Fatal(err)
		}
		for key := range s.held[w] {
			if err := s.d.Finish(w, key[0], []int64{key[1]}); err != nil {
				t.Fatal(err)
			}
			delete(s.held[w], key)
		}
	}
	s.check(t)
}

func mapOr(m map[int64]int) map[int64]int {
	if m == nil {
		return map[int64]int{}
	}
	return m
}

// TestDynamicExactlyOnceWithoutFailures: without Expire, over all epochs,
// every split is handed out exactly once per epoch.
func TestDynamicExactlyOnceWithoutFailures(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for trial := range 200 {
		numSplits, epochs := r.Int64N(40), 1+r.Int64N(4)
		s := newSim(NewDynamic(numSplits, epochs), 1+r.IntN(5))
		for range r.IntN(300) {
			s.step(t, r.Uint32(), false)
		}
		s.drain(t)
		if numSplits == 0 {
			continue
		}
		if int64(len(s.leased)) != epochs {
			t.Fatalf("trial %d: %d epochs leased, want %d", trial, len(s.leased), epochs)
		}
		for e, m := range s.leased {
			if int64(len(m)) != numSplits {
				t.Fatalf("trial %d: epoch %d leased %d distinct splits of %d", trial, e, len(m), numSplits)
			}
			for sp, n := range m {
				if n != 1 || sp < 0 || sp >= numSplits {
					t.Fatalf("trial %d: epoch %d split %d leased %d times", trial, e, sp, n)
				}
			}
		}
		if p := s.d.Progress(); p.Total.Lost != 0 || p.Total.Finished != numSplits*epochs {
			t.Fatalf("trial %d: progress %+v", trial, p)
		}
	}
}

// TestDynamicAtMostOnceWithExpiry: with workers expiring or handing back
// what they hold, no split is
// handed out twice in an epoch (checked in step), and leased = finished +
// lost + outstanding throughout (checked in check).
func TestDynamicAtMostOnceWithExpiry(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	var handedBack int64
	for range 200 {
		s := newSim(NewDynamic(r.Int64N(50), r.Int64N(4)), 1+r.IntN(5))
		for range 400 {
			s.step(t, r.Uint32(), true)
		}
		if s.d.Epochs > 0 {
			s.drain(t)
			if p := s.d.Progress(); p.Total.Leased != s.d.NumSplits*s.d.Epochs {
				t.Fatalf("complete job leased %d of %d×%d", p.Total.Leased, s.d.NumSplits, s.d.Epochs)
			}
		}
		handedBack += s.d.Total.HandedBack
	}
	if handedBack == 0 {
		t.Fatal("no split was handed back: the simulation does not exercise HandBack")
	}
}

// FuzzDynamic runs random operation sequences: nothing panics and every
// invariant holds after every operation.
// preferOf is a worker's preferred splits for a lease (LeasePreferring),
// drawn from x: none for one draw in four, else up to three intervals of
// [0, numSplits).
func preferOf(x uint64, numSplits int64) ranges.Set {
	if numSplits == 0 || x%4 == 0 {
		return nil
	}
	var r ranges.Set
	for k := range 1 + x%3 {
		y := x >> (8 * (k + 1))
		lo := int64(y) % numSplits
		r.AddSpan(lo, min(lo+1+int64(y>>16)%4, numSplits))
	}
	return r
}

func FuzzDynamic(f *testing.F) {
	f.Add(uint8(10), uint8(2), uint8(3), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(0), uint8(0), uint8(1), []byte{9, 9, 9})
	f.Add(uint8(3), uint8(0), uint8(2), []byte{1, 11, 21, 31, 9, 5, 15})
	f.Fuzz(func(t *testing.T, numSplits, epochs, workers uint8, ops []byte) {
		s := newSim(NewDynamic(int64(numSplits), int64(epochs%5)), 1+int(workers%6))
		for i := 0; i+1 < len(ops) && i < 2000; i += 2 {
			s.step(t, uint32(ops[i])|uint32(ops[i+1])<<8|uint32(ops[i]^ops[i+1])<<16, true)
		}
		if s.d.Epochs > 0 {
			s.drain(t)
		}
	})
}

// LeasePreferring hands out the preferred splits first, ahead of the
// cursor, which then skips them: every split still goes out once per
// epoch, and the counts and invariants hold throughout.
func TestLeasePreferring(t *testing.T) {
	d := NewDynamic(10, 2)
	step := func(what string, got Lease, epoch int64, want []int64) {
		t.Helper()
		if err := d.Validate(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Epoch != epoch || !reflect.DeepEqual(got.Splits, want) {
			t.Fatalf("%s: epoch %d splits %v, want epoch %d %v", what, got.Epoch, got.Splits, epoch, want)
		}
	}
	step("a prefers 5..7", d.LeasePreferring("a", 1, 3, ranges.Set{5, 8}), 0, []int64{5, 6, 7})
	if d.Next != 0 || len(d.Ahead) != 3 || d.Progress().RemainingInEpoch != 7 {
		t.Fatalf("after the preferred lease: next %d, ahead %v, %+v", d.Next, d.Ahead, d.Progress())
	}
	step("the cursor", d.Lease("b", 1, 4), 0, []int64{0, 1, 2, 3})
	step("a prefers 6..9, has 6 and 7", d.LeasePreferring("a", 2, 2, ranges.Set{6, 10}), 0, []int64{8, 9})
	step("the cursor skips what went ahead", d.Lease("b", 2, 4), 0, []int64{4})
	if d.Epoch != 1 || d.Next != 0 || d.Ahead != nil {
		t.Fatalf("epoch 0 handed out: epoch %d next %d ahead %v", d.Epoch, d.Next, d.Ahead)
	}
	step("a preference at the cursor moves it", d.LeasePreferring("a", 3, 2, ranges.Set{0, 2}), 1, []int64{0, 1})
	if d.Next != 2 || d.Ahead != nil {
		t.Fatalf("next %d ahead %v, want 2 and none", d.Next, d.Ahead)
	}
	step("a preference beyond the splits", d.LeasePreferring("a", 4, 2, ranges.Set{9, 20}), 1, []int64{9, 2})
	if err := d.Finish("a", 0, []int64{5, 6, 7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	if c := d.Total; c.Leased != 14 || c.Finished != 5 {
		t.Fatalf("total counts %+v", c)
	}
	c := d.Clone()
	if !reflect.DeepEqual(c, d) {
		t.Fatal("clone differs")
	}
}
