package splits

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// rs is a shorthand for epoch → split → ranges.
type rs = map[int64]map[int64]ranges.Set

func TestComplement(t *testing.T) {
	cases := []struct {
		in   ranges.Set
		want ranges.Set
	}{
		{ranges.Set{0, 3}, ranges.Set{3, ResumeEnd}},
		{ranges.Set{2, 5}, ranges.Set{0, 2, 5, ResumeEnd}},
		{ranges.Set{1, 2}, ranges.Set{0, 1, 2, ResumeEnd}},
		{ranges.Set{0, 2, 4, 6}, ranges.Set{2, 4, 6, ResumeEnd}},
		{ranges.Set{3, 4, 7, 9}, ranges.Set{0, 3, 4, 7, 9, ResumeEnd}},
		{ranges.Set{5, ResumeEnd}, ranges.Set{0, 5}},
		{ranges.Set{0, ResumeEnd}, nil},
	}
	for _, tc := range cases {
		got := complement(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("complement(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("complement(%v) = %v: %v", tc.in, got, err)
		}
		// Nothing in both, nothing in neither (below ResumeEnd).
		if x := got.Intersect(tc.in); !x.Empty() {
			t.Errorf("complement(%v) overlaps it: %v", tc.in, x)
		}
		all := tc.in.Clone()
		all.AddAll(got)
		if !slices.Equal(all, ranges.Set{0, ResumeEnd}) {
			t.Errorf("complement(%v) ∪ it = %v", tc.in, all)
		}
	}
}

func TestWaitingAndAddPart(t *testing.T) {
	if NewDynamicExactlyOnce(2, 1).Waiting() {
		t.Fatal("a job not resumed waits")
	}
	d := NewDynamicResumed(4, 2, 9)
	if !d.Waiting() {
		t.Fatal("a resumed job with no part does not wait")
	}
	if _, err := NewDynamicExactlyOnce(2, 1).AddPart("a", 1, ranges.Delivered{}); !errors.Is(err, ErrResumed) {
		t.Fatalf("a part for a job not resumed: %v", err)
	}
	unchanged := func(what string, f func() (bool, error)) {
		t.Helper()
		before := d.Clone()
		added, err := f()
		if err == nil || added {
			t.Fatalf("%s: added %v, err %v", what, added, err)
		}
		if !reflect.DeepEqual(d, before) {
			t.Fatalf("%s: refused, but the state changed", what)
		}
	}
	unchanged("want 0", func() (bool, error) { return d.AddPart("b", 0, ranges.Delivered{}) })
	unchanged("want too many", func() (bool, error) { return d.AddPart("b", jobspec.MaxResumeParts+1, ranges.Delivered{}) })
	unchanged("invalid part", func() (bool, error) { return d.AddPart("b", 2, ranges.Delivered{DoneBefore: 3}) })
	unchanged("split out of range", func() (bool, error) { return d.AddPart("b", 2, ranges.Delivered{Returned: rs{0: {4: {0, 1}}}}) })

	pb := ranges.Delivered{Returned: rs{0: {1: {0, 3}}}}
	if added, err := d.AddPart("b", 2, pb); !added || err != nil {
		t.Fatalf("first part: %v %v", added, err)
	}
	if !d.Waiting() || d.Resume.Want != 2 {
		t.Fatalf("after one part of two: waiting %v, want %d", d.Waiting(), d.Resume.Want)
	}
	// The same part again (a retry, even with other contents): no change.
	before := d.Clone()
	if added, err := d.AddPart("b", 3, ranges.Delivered{Returned: rs{1: {1: {0, 1}}}}); added || err != nil {
		t.Fatalf("part again: %v %v", added, err)
	}
	if !reflect.DeepEqual(d, before) {
		t.Fatal("a part already in changed the state")
	}
	// A part that saw more consumers raises Want; one that saw fewer does not lower it.
	if added, err := d.AddPart("a", 3, ranges.Delivered{Returned: rs{0: {1: {3, 4}}}}); !added || err != nil {
		t.Fatalf("second part: %v %v", added, err)
	}
	if !d.Waiting() || d.Resume.Want != 3 || !slices.Equal(d.Resume.Parts, []string{"a", "b"}) {
		t.Fatalf("after two parts: waiting %v, %+v", d.Waiting(), d.Resume)
	}
	if l := d.Lease("w", 1, 10); len(l.Splits) != 0 || l.Done || l.AllProduced || d.Complete() {
		t.Fatalf("a waiting job leased %+v (complete %v)", l, d.Complete())
	}
	if p := d.Progress(); p.Total.Leased != 0 || p.Exact.ResumeFrom != 9 || p.Exact.ResumeWant != 3 || p.Exact.ResumeHave != 2 || p.Exact.SettledBefore != 0 {
		t.Fatalf("waiting progress %+v %+v", p, p.Exact)
	}
	if added, err := d.AddPart("c", 1, ranges.Delivered{DoneBefore: 1}); !added || err != nil {
		t.Fatalf("third part: %v %v", added, err)
	}
	if d.Waiting() || d.Resume.Want != 3 || !slices.Equal(d.Resume.Parts, []string{"a", "b", "c"}) {
		t.Fatalf("after three parts: waiting %v, %+v", d.Waiting(), d.Resume)
	}
	// c claims epoch 0 done: what a and b returned of it is in that.
	want := ranges.Delivered{DoneBefore: 1}
	if !reflect.DeepEqual(d.Resume.Prior, want) {
		t.Fatalf("prior %+v, want %+v", d.Resume.Prior, want)
	}
	// Started: a new part is refused; a part already in is still no change.
	unchanged("after the start", func() (bool, error) { return d.AddPart("d", 3, ranges.Delivered{}) })
	if _, err := d.AddPart("d", 3, ranges.Delivered{}); !errors.Is(err, ErrResumed) {
		t.Fatalf("after the start: %v", err)
	}
	if added, err := d.AddPart("a", 3, ranges.Delivered{}); added || err != nil {
		t.Fatalf("a part already in, after the start: %v %v", added, err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

// resumedState is a job resumed from parts, which it has all.
func resumedState(t *testing.T, numSplits, epochs int64, parts ...ranges.Delivered) *DynamicState {
	t.Helper()
	d := NewDynamicResumed(numSplits, epochs, 1)
	for i, p := range parts {
		if _, err := d.AddPart(fmt.Sprint("c", i), len(parts), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLeaseResumed(t *testing.T) {
	// 4 splits, 3 epochs. Epoch 0: only elements 1 and 2 of split 2
	// missing; epoch 1 complete; epoch 2: split 1 returned in part.
	d := resumedState(t, 4, 3, ranges.Delivered{DoneBefore: 2, Missing: rs{0: {2: {1, 3}}}, Returned: rs{2: {1: {0, 4}}}})
	check := func(what string) {
		t.Helper()
		if err := d.Validate(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	l := d.Lease("w1", 1, 10)
	wantEx := []ranges.Set{{0, 1, 3, ResumeEnd}}
	if l.Epoch != 0 || !slices.Equal(l.Splits, []int64{2}) || !reflect.DeepEqual(l.Exclude, wantEx) || l.Done || l.AllProduced {
		t.Fatalf("first lease %+v", l)
	}
	check("first lease")
	// Splits 0, 1, 3 of epoch 0 and all of epoch 1 were skipped; epoch 2 is next.
	if p := d.Progress(); p.Exact.Skipped != 7 || d.Epoch != 2 || d.Next != 0 || p.Total.Leased != 8 || p.Total.Finished != 7 {
		t.Fatalf("after the first lease: epoch %d next %d, %+v %+v", d.Epoch, d.Next, p, p.Exact)
	}
	if got := d.Exact.Delivered[0][2]; !slices.Equal(got, wantEx[0]) {
		t.Fatalf("delivered of the excluded split: %v", got)
	}
	if len(d.Resume.Prior.Missing) != 0 {
		t.Fatalf("prior not consumed: %+v", d.Resume.Prior)
	}
	l = d.Lease("w2", 1, 10)
	if l.Epoch != 2 || !slices.Equal(l.Splits, []int64{0, 1, 2, 3}) || !reflect.DeepEqual(l.Exclude, []ranges.Set{nil, {0, 4}, nil, nil}) || !l.Done || l.AllProduced {
		t.Fatalf("second lease %+v", l)
	}
	check("second lease")
	if d.Resume.Prior.Returned != nil && len(d.Resume.Prior.Returned) != 0 {
		t.Fatalf("prior not consumed: %+v", d.Resume.Prior)
	}
	// The worker emits what is not excluded; receipts settle it.
	if err := d.Produce("w1", 0, []ranges.SplitEmitted{{Split: 2, Emitted: ranges.Span(1, 3)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Receive("c", 0, 2, ranges.Span(1, 3)); err != nil {
		t.Fatal(err)
	}
	if d.SettledBefore() != 2 {
		t.Fatalf("settled before %d, want 2", d.SettledBefore())
	}
	var done []ranges.SplitEmitted
	for _, s := range []int64{0, 2, 3} {
		done = append(done, ranges.SplitEmitted{Split: s, Emitted: ranges.Span(0, 4)})
	}
	done = append(done, ranges.SplitEmitted{Split: 1, Emitted: nil}) // all excluded: nothing emitted
	if err := d.Produce("w2", 2, done); err != nil {
		t.Fatal(err)
	}
	check("produce")
	for _, s := range []int64{0, 2, 3} {
		if err := d.Receive("c", 2, s, ranges.Span(0, 4)); err != nil {
			t.Fatal(err)
		}
	}
	check("receive")
	p := d.Progress()
	if !p.Complete || p.Exact.Skipped != 7 || p.Total.Leased != 12 || p.Total.Finished != 12 || p.Exact.Duplicates != 0 || p.Exact.Delivered != 14 || p.Exact.SettledBefore != 3 {
		t.Fatalf("end: %+v %+v", p, p.Exact)
	}
}

// TestLeaseResumedEverything: checkpoints that cover every epoch leave
// nothing to lease: the first lease ends the job.
func TestLeaseResumedEverything(t *testing.T) {
	d := resumedState(t, 3, 2, ranges.Delivered{DoneBefore: 1}, ranges.Delivered{Returned: rs{1: {0: {0, 5}}}}, ranges.Delivered{DoneBefore: 2})
	if d.Complete() || d.Progress().Done {
		t.Fatal("complete before any lease")
	}
	l := d.Lease("w", 1, 1)
	if len(l.Splits) != 0 || !l.Done || !l.AllProduced || !d.Complete() {
		t.Fatalf("lease %+v, complete %v", l, d.Complete())
	}
	if p := d.Progress(); p.Exact.Skipped != 6 || p.Total.Leased != 6 || p.Total.Finished != 6 || p.Exact.SettledBefore != 2 {
		t.Fatalf("progress %+v %+v", p, p.Exact)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseResumedOrphan: a split leased with prior exclusions whose
// worker dies is leased again with the same exclusions, plus what the
// receipts add; skipped splits between leases count once.
func TestLeaseResumedOrphan(t *testing.T) {
	d := resumedState(t, 5, 1, ranges.Delivered{DoneBefore: 1, Missing: rs{0: {1: {2, 4}, 3: {0, 6}}}})
	l := d.Lease("w1", 1, 1)
	if !slices.Equal(l.Splits, []int64{1}) || !reflect.DeepEqual(l.Exclude, []ranges.Set{{0, 2, 4, ResumeEnd}}) {
		t.Fatalf("lease %+v", l)
	}
	if err := d.Receive("c", 0, 1, ranges.Span(2, 3)); err != nil {
		t.Fatal(err)
	}
	d.ExpireWorker("w1", []string{"c"})
	d.Fence("c", "w1")
	l = d.Lease("w2", 1, 5)
	if l.Epoch != 0 || !slices.Equal(l.Splits, []int64{1}) || !reflect.DeepEqual(l.Exclude, []ranges.Set{{0, 3, 4, ResumeEnd}}) {
		t.Fatalf("re-lease %+v", l)
	}
	l = d.Lease("w2", 2, 5)
	if !slices.Equal(l.Splits, []int64{3}) || !reflect.DeepEqual(l.Exclude, []ranges.Set{{6, ResumeEnd}}) || !l.Done {
		t.Fatalf("lease %+v", l)
	}
	if p := d.Progress(); p.Exact.Skipped != 3 || p.Exact.Requeued != 1 {
		t.Fatalf("progress %+v", p.Exact)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateResumeState(t *testing.T) {
	base := func() *DynamicState {
		d := resumedState(t, 4, 2, ranges.Delivered{Returned: rs{0: {0: {0, 2}, 3: {1, 2}}, 1: {2: {0, 1}}}})
		d.Lease("w", 1, 2) // hands out splits 0 and 1 of epoch 0
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		name    string
		corrupt func(d *DynamicState)
		want    string
	}{
		{"prior entry for a split handed out", func(d *DynamicState) { ranges.Put(d.Resume.Prior.Returned, 0, 1, ranges.Set{0, 1}) }, "split 1 of epoch 0, handed out already"},
		{"want 0", func(d *DynamicState) { d.Resume.Want = 0 }, "want 0"},
		{"want too many", func(d *DynamicState) { d.Resume.Want = jobspec.MaxResumeParts + 1 }, "want 1025"},
		{"more parts than wanted", func(d *DynamicState) { d.Resume.Parts = []string{"a", "b"} }, "parts [a b]"},
		{"parts unsorted", func(d *DynamicState) { d.Resume.Want, d.Resume.Parts = 3, []string{"b", "a"} }, "parts [b a]"},
		{"parts repeated", func(d *DynamicState) { d.Resume.Want, d.Resume.Parts = 3, []string{"a", "a"} }, "parts [a a]"},
		{"invalid prior", func(d *DynamicState) { d.Resume.Prior.Missing = rs{1: {2: {0, 1}}} }, "missing in epoch 1"},
		{"prior ranges invalid", func(d *DynamicState) { d.Resume.Prior.Returned[1][2] = ranges.Set{2, 1} }, "reversed"},
		{"at-most-once", func(d *DynamicState) { d.Exact = nil }, "at-most-once"},
	}
	for _, tc := range cases {
		d := base()
		tc.corrupt(d)
		if err := d.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestCloneResume(t *testing.T) {
	mk := func() *DynamicState {
		return resumedState(t, 4, 2, ranges.Delivered{DoneBefore: 1, Missing: rs{0: {2: {1, 3}}}}, ranges.Delivered{Returned: rs{1: {1: {0, 2}}}})
	}
	d, same := mk(), mk()
	c := d.Clone()
	if !reflect.DeepEqual(c, d) {
		t.Fatal("clone differs")
	}
	c.Resume.Parts[0] = "x"
	c.Resume.Prior.Missing[0][2][0] = 0
	c.Resume.Prior.Returned[1][1] = ranges.Set{5, 6}
	c.Resume.Prior.Returned[1][3] = ranges.Set{5, 6}
	c.Resume.Prior.Missing[0][0] = ranges.Set{5, 6}
	c.Resume.Want = 7
	c.Lease("w", 1, 4)
	if !reflect.DeepEqual(d, same) {
		t.Fatalf("changing the clone changed the original: %+v", d.Resume)
	}
	if (*DynamicState)(nil).Clone() != nil || NewDynamicExactlyOnce(1, 1).Clone().Resume != nil {
		t.Fatal("clone of nil, or of a job not resumed")
	}
}

// rsTracker models client/checkpoint.go's tracker: what reached the
// trainer through one consumer, and its checkpoint part.
type rsTracker struct {
	part        ranges.Delivered
	unreturned  map[[2]int64]ranges.Set
	resumedPart bool
}

func newRSTracker(from *ranges.Delivered) *rsTracker {
	t := &rsTracker{unreturned: map[[2]int64]ranges.Set{}}
	if from != nil {
		t.part, t.resumedPart = from.Clone(), true
	}
	return t
}

func (t *rsTracker) received(x elem) {
	k := [2]int64{x.e, x.s}
	u := t.unreturned[k]
	u.Add(x.i)
	t.unreturned[k] = u
}

func (t *rsTracker) returned(x elem) {
	k := [2]int64{x.e, x.s}
	span := ranges.Span(x.i, x.i+1)
	if u := t.unreturned[k].Minus(span); u.Empty() {
		delete(t.unreturned, k)
	} else {
		t.unreturned[k] = u
	}
	if x.e < t.part.DoneBefore {
		if m := t.part.Missing[x.e][x.s].Minus(span); m.Empty() {
			ranges.Del(t.part.Missing, x.e, x.s)
		} else {
			t.part.Missing[x.e][x.s] = m
		}
		return
	}
	if t.part.Returned == nil {
		t.part.Returned = rs{}
	}
	have, _ := ranges.Get(t.part.Returned, x.e, x.s)
	have.AddSpan(x.i, x.i+1)
	ranges.Put(t.part.Returned, x.e, x.s, have)
}

// beat is the tracker's heartbeat: consumers is how many the job has
// (this one among them; none ever departs in the model).
func (t *rsTracker) beat(consumers int, x *ExactProgress) {
	if consumers != 1 || x.Departures != 0 {
		return
	}
	if x.ResumeWant > 0 && (!t.resumedPart || x.ResumeWant != 1 || x.ResumeHave != 1) {
		return
	}
	if x.ResumeWant == 0 && t.resumedPart {
		return
	}
	if x.SettledBefore <= t.part.DoneBefore {
		return
	}
	for e := t.part.DoneBefore; e < x.SettledBefore; e++ {
		delete(t.part.Returned, e)
	}
	for k, u := range t.unreturned {
		if k[0] >= t.part.DoneBefore && k[0] < x.SettledBefore {
			if t.part.Missing == nil {
				t.part.Missing = rs{}
			}
			ranges.Put(t.part.Missing, k[0], k[1], u.Clone())
		}
	}
	t.part.DoneBefore = x.SettledBefore
	if len(t.part.Returned) == 0 {
		t.part.Returned = nil
	}
}

func (t *rsTracker) snapshot() ranges.Delivered {
	p := t.part.Clone()
	if len(p.Missing) == 0 {
		p.Missing = nil
	}
	if len(p.Returned) == 0 {
		p.Returned = nil
	}
	return p
}

// rsConsumer is a consumer of the resume simulation: buf holds what it
// received and has not returned to the trainer yet, in order.
type rsConsumer struct {
	name    string
	buf     []elem
	pending map[[2]int64]ranges.Set
	fenced  map[string]bool
	tr      *rsTracker
}

// TestResumeSimulation runs random jobs, checkpoints every consumer at a
// random point, resumes a new job from the checkpoints (sometimes twice
// in a row), runs it to the end, and checks that every element the
// pipeline keeps reached a trainer exactly once per epoch: before a
// checkpoint, or after the resume.
func TestResumeSimulation(t *testing.T) {
	var st resumeStats
	for seed := range uint64(1000) {
		resumeSim(t, seed, &st)
	}
	// The runs must reach the cases that matter, or they prove little.
	t.Logf("%+v", st)
	if st.claims < 50 || st.skipped < 50 || st.partial < 50 || st.twice < 100 || st.kills < 100 || st.multi < 100 || st.excludedEmpty < 20 {
		t.Fatalf("the runs cover too little: %+v", st)
	}
}

// resumeStats counts what the simulated runs went through.
type resumeStats struct {
	claims        int   // checkpoints that claim epochs done (DoneBefore > 0)
	skipped       int64 // splits skipped by resumed jobs
	partial       int   // splits leased with exclusions from checkpoints
	excludedEmpty int   // splits whose exclusions left nothing to emit
	twice         int   // runs resumed twice
	kills         int   // workers expired
	multi         int   // checkpoints of jobs with several consumers
}

func resumeSim(t *testing.T, seed uint64, st *resumeStats) {
	rng := rand.New(rand.NewPCG(seed, 4242))
	numSplits, size, epochs := int64(1+rng.IntN(5)), int64(1+rng.IntN(6)), int64(1+rng.IntN(3))
	nCons := 1 + rng.IntN(3)
	if rng.IntN(2) == 0 {
		nCons = 1 // the compact checkpoints of a single consumer, more often
	}
	filter, salt := rng.IntN(2) == 0, rng.Int64N(1000)
	keep := func(e, s, i int64) bool { return !filter || (e*31+s*17+i*7+salt)%3 != 0 }
	resumes := 1
	if rng.IntN(3) == 0 {
		resumes = 2
		st.twice++
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (splits %d, size %d, epochs %d, consumers %d, filter %v, resumes %d): %s",
			seed, numSplits, size, epochs, nCons, filter, resumes, fmt.Sprintf(format, args...))
	}
	returned := map[elem]int{} // reached a trainer, over every run
	d := NewDynamicExactlyOnce(numSplits, epochs)
	var parts []ranges.Delivered // the checkpoints the current run resumed from
	for run := 0; run <= resumes; run++ {
		final := run == resumes
		consumers := make([]*rsConsumer, nCons)
		names := make([]string, nCons)
		for i := range consumers {
			var from *ranges.Delivered
			if parts != nil {
				from = &parts[i]
			}
			names[i] = fmt.Sprintf("r%dc%d", run, i)
			consumers[i] = &rsConsumer{name: names[i], pending: map[[2]int64]ranges.Set{}, fenced: map[string]bool{}, tr: newRSTracker(from)}
		}
		// What the checkpoints say, to check the leases against.
		var prior *ranges.Delivered
		if d.Resume != nil {
			p := d.Resume.Prior.Clone()
			prior = &p
		}
		leased := map[[2]int64]bool{}
		var workers []*simWorker
		addWorker := func() { workers = append(workers, &simWorker{name: fmt.Sprintf("r%dw%d", run, len(workers))}) }
		for range 1 + rng.IntN(3) {
			addWorker()
		}
		reqs := map[string]uint64{}
		check := func(what string) {
			t.Helper()
			if err := d.Validate(); err != nil {
				fail("run %d, after %s: %v", run, what, err)
			}
		}
		flush := func(c *rsConsumer) {
			for _, k := range slices.SortedFunc(mapKeys(c.pending), func(a, b [2]int64) int {
				if a[0] != b[0] {
					return int(a[0] - b[0])
				}
				return int(a[1] - b[1])
			}) {
				if err := d.Receive(c.name, k[0], k[1], c.pending[k]); err != nil {
					fail("receive %v: %v", k, err)
				}
			}
			c.pending = map[[2]int64]ranges.Set{}
		}
		giveBack := func(c *rsConsumer, n int) {
			for ; n > 0 && len(c.buf) > 0; n-- {
				x := c.buf[0]
				c.buf = c.buf[1:]
				returned[x]++
				c.tr.returned(x)
			}
		}
		work := int(numSplits*size*epochs) * 8
		stop := 1 << 30
		if !final {
			stop = rng.IntN(work + 1)
		}
		kills := 0
		for step := 0; step < stop && !d.Complete(); step++ {
			if step > 40000 {
				fail("run %d: not complete after %d steps: %+v %+v", run, step, d.Progress(), d.Progress().Exact)
			}
			switch r := rng.IntN(100); {
			case r < 20: // a live worker leases
				w := workers[rng.IntN(len(workers))]
				if w.dead || w.exp || len(w.leases) > 2 {
					continue
				}
				reqs[w.name]++
				l := d.LeasePreferring(w.name, reqs[w.name], 1+rng.IntN(3), preferOf(rng.Uint64(), d.NumSplits))
				if d.Waiting() {
					fail("run %d: a running job waits", run)
				}
				for i, s := range l.Splits {
					var ex ranges.Set
					if l.Exclude != nil {
						ex = l.Exclude[i]
					}
					k := [2]int64{l.Epoch, s}
					if !leased[k] && prior != nil { // first lease: the exclusions are the checkpoints'
						var want ranges.Set
						if l.Epoch < prior.DoneBefore {
							miss, ok := prior.Missing[l.Epoch][s]
							if !ok {
								fail("run %d: split %d of epoch %d leased, the checkpoints delivered it", run, s, l.Epoch)
							}
							want = complement(miss)
						} else {
							want = prior.Returned[l.Epoch][s]
						}
						if !ex.Empty() {
							st.partial++
							if ranges.Span(0, size).Minus(ex).Empty() {
								st.excludedEmpty++
							}
						}
						if !slices.Equal(ex, want) {
							fail("run %d: split %d of epoch %d leased excluding %v, want %v", run, s, l.Epoch, ex, want)
						}
					}
					if !leased[k] && prior == nil && !ex.Empty() {
						fail("run %d: a fresh split excludes %v", run, ex)
					}
					leased[k] = true
					w.leases = append(w.leases, simLease{e: l.Epoch, s: s, exclude: ex})
				}
				check("lease")
			case r < 50: // a worker reads an element, or reports a split produced
				w := workers[rng.IntN(len(workers))]
				if w.dead || len(w.leases) == 0 {
					continue
				}
				l := &w.leases[0]
				if l.next < size {
					i := l.next
					l.next++
					if !l.exclude.Contains(i) && keep(l.e, l.s, i) {
						w.outbox = append(w.outbox, elem{l.e, l.s, i})
						l.emitted.Add(i)
					}
					continue
				}
				err := d.Produce(w.name, l.e, []ranges.SplitEmitted{{Split: l.s, Emitted: l.emitted}})
				if w.exp != (err != nil) {
					fail("run %d: produce by worker (expired %v): %v", run, w.exp, err)
				}
				w.leases = w.leases[1:]
				check("produce")
			case r < 75: // a consumer takes an element from a worker it reads
				c := consumers[rng.IntN(len(consumers))]
				w := workers[rng.IntN(len(workers))]
				if w.dead || c.fenced[w.name] || len(w.outbox) == 0 {
					continue
				}
				x := w.outbox[0]
				w.outbox = w.outbox[1:]
				c.buf = append(c.buf, x)
				c.tr.received(x)
				k := [2]int64{x.e, x.s}
				got := c.pending[k]
				got.Add(x.i)
				c.pending[k] = got
			case r < 80: // the trainer takes batches
				c := consumers[rng.IntN(len(consumers))]
				giveBack(c, 1+rng.IntN(3))
			case r < 87: // receipts
				flush(consumers[rng.IntN(len(consumers))])
				check("receive")
			case r < 95: // a heartbeat
				x := d.Progress().Exact
				for _, c := range consumers {
					c.tr.beat(nCons, x)
				}
			case r < 98: // a consumer drops and fences an expired worker
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
			default: // a worker is expired: dead, or paused and still sending
				w := workers[rng.IntN(len(workers))]
				if kills >= 2 || w.exp {
					continue
				}
				kills++
				st.kills++
				w.exp, w.dead = true, rng.IntN(2) == 0
				d.ExpireWorker(w.name, names)
				addWorker()
				check("expire")
			}
			if step > 20000 { // keep receipts and fences flowing
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
		if x := d.Progress().Exact; x.Duplicates != 0 || x.Abandoned != 0 {
			fail("run %d: %+v", run, x)
		}
		if final {
			if !d.Complete() {
				fail("run %d: not complete", run)
			}
			for _, c := range consumers {
				giveBack(c, len(c.buf))
			}
			if prior != nil { // every split the checkpoints delivered was skipped
				var skipped int64
				for e := range min(prior.DoneBefore, epochs) {
					skipped += numSplits - int64(len(prior.Missing[e]))
				}
				st.skipped += skipped
				if got := d.Progress().Exact.Skipped; got != skipped {
					fail("run %d: skipped %d splits, want %d (prior %+v)", run, got, skipped, prior)
				}
			}
			if p := d.Progress(); p.Total.Leased != numSplits*epochs || p.Total.Finished != numSplits*epochs || p.Exact.SettledBefore != epochs {
				fail("run %d: end progress %+v %+v", run, p, p.Exact)
			}
			break
		}
		// Checkpoint: every consumer, at once; then the job is resumed
		// from the checkpoints, given in any order, some twice.
		parts = make([]ranges.Delivered, nCons)
		for i, c := range consumers {
			parts[i] = c.tr.snapshot()
			if err := parts[i].Validate(numSplits, epochs, jobspec.MaxEpochs, jobspec.MaxReceiptIntervals); err != nil {
				fail("run %d: checkpoint of %s: %v", run, c.name, err)
			}
			if parts[i].DoneBefore > 0 {
				st.claims++
			}
			if nCons > 1 {
				st.multi++
			}
			if nCons > 1 && parts[i].DoneBefore != 0 {
				fail("run %d: a checkpoint claims epochs done with %d consumers", run, nCons)
			}
		}
		r := NewDynamicResumed(numSplits, epochs, uint64(run+1))
		order := rng.Perm(nCons)
		for k, i := range order {
			if !r.Waiting() {
				fail("run %d: started after %d of %d parts", run, k, nCons)
			}
			if l := r.Lease("early", uint64(k+1), 4); len(l.Splits) != 0 || l.Done || l.AllProduced {
				fail("run %d: a waiting job leased %+v", run, l)
			}
			if added, err := r.AddPart(names[i], nCons, parts[i]); !added || err != nil {
				fail("run %d: part %s: %v %v", run, names[i], added, err)
			}
			if rng.IntN(3) == 0 { // a retry
				j := order[rng.IntN(k+1)] // one already in
				if added, err := r.AddPart(names[j], nCons, parts[j]); added || err != nil {
					fail("run %d: part %s again: %v %v", run, names[j], added, err)
				}
			}
			if err := r.Validate(); err != nil {
				fail("run %d: resumed state: %v", run, err)
			}
		}
		if r.Waiting() {
			fail("run %d: waits with every part in", run)
		}
		if _, err := r.AddPart("late", nCons, ranges.Delivered{}); !errors.Is(err, ErrResumed) {
			fail("run %d: a late part: %v", run, err)
		}
		d = r
	}
	for e := range epochs {
		for s := range numSplits {
			for i := range size {
				want := 0
				if keep(e, s, i) {
					want = 1
				}
				if got := returned[elem{e, s, i}]; got != want {
					fail("element %d/%d/%d reached the trainers %d times, want %d", e, s, i, got, want)
				}
			}
		}
	}
	if len(returned) > int(numSplits*size*epochs) {
		fail("elements out of range returned: %v", returned)
	}
}

// TestExpectParts: a resumed job waits for the checkpoint of every
// consumer it expects (the receivers of the job it resumes), even when
// the checkpoints in count fewer; parts it did not expect are taken too.
func TestExpectParts(t *testing.T) {
	old := NewDynamicExactlyOnce(4, 1)
	l := old.Lease("w", 1, 4)
	for _, c := range []string{"b", "a", "b"} { // b twice: one receiver
		if err := old.Receive(c, 0, l.Splits[0], ranges.Set{0, 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Receive("c", 0, l.Splits[1], nil); err != nil { // nothing delivered: not a receiver
		t.Fatal(err)
	}
	if !slices.Equal(old.Exact.Receivers, []string{"a", "b"}) {
		t.Fatalf("receivers %v, want [a b]", old.Exact.Receivers)
	}
	if err := old.Validate(); err != nil {
		t.Fatal(err)
	}

	d := NewDynamicResumed(4, 1, 1)
	d.ExpectParts(old.Exact.Receivers)
	if _, err := d.AddPart("a", 1, ranges.Delivered{}); err != nil {
		t.Fatal(err)
	}
	if !d.Waiting() {
		t.Fatalf("a's checkpoint counted 1 consumer, but b had elements delivered: the job must wait for b (%+v)", d.Resume)
	}
	if _, err := d.AddPart("idle", 1, ranges.Delivered{}); err != nil { // a consumer that got nothing still checkpointed
		t.Fatal(err)
	}
	if !d.Waiting() {
		t.Fatal("another consumer's checkpoint is not b's")
	}
	if _, err := d.AddPart("b", 1, ranges.Delivered{}); err != nil {
		t.Fatal(err)
	}
	if d.Waiting() || d.Resume.Want != 3 {
		t.Fatalf("every expected part in: waiting %v, %+v", d.Waiting(), d.Resume)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := d.Clone()
	bad.Resume.Expect = []string{"b", "a"}
	if err := bad.Validate(); err == nil {
		t.Fatal("unsorted expected parts validate")
	}
}
