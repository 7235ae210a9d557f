package rounds

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkSchedule checks a valid schedule's answers against each other on
// rounds [0, horizon), horizon >= s.LastFrom(): every round has one worker,
// a member of the rotation in force; RoundsOf and NextRoundOf agree with
// WorkerFor; Compact keeps every later round's worker.
func checkSchedule(t testing.TB, s Schedule, horizon int64, rng *rand.Rand) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("invalid schedule %s: %v", describe(s), err)
	}
	ext := horizon + int64(len(s.Current())) // every current worker serves in [horizon, ext)
	owner := make([]string, ext)
	workers := map[string]bool{}
	for r := range ext {
		w, err := s.WorkerFor(r)
		if err != nil {
			t.Fatalf("%s: round %d: %v", describe(s), r, err)
		}
		if !slices.Contains(s.RotationAt(r), w) {
			t.Fatalf("%s: round %d served by %q, not in rotation %q", describe(s), r, w, s.RotationAt(r))
		}
		owner[r] = w
		workers[w] = true
	}
	for _, c := range s.Changes {
		for _, w := range c.Workers {
			workers[w] = true
		}
	}
	workers["never-a-worker"] = true

	// RoundsOf over random ranges is exactly the rounds WorkerFor gives w.
	for range 8 {
		lo := rng.Int64N(ext+4) - 2
		hi := lo + rng.Int64N(ext-max(lo, 0)+3)
		for w := range workers {
			var want []int64
			for r := max(lo, 0); r < min(hi, ext); r++ {
				if owner[r] == w {
					want = append(want, r)
				}
			}
			if got := s.RoundsOf(w, lo, min(hi, ext)); !slices.Equal(got, want) {
				t.Fatalf("%s: RoundsOf(%q, %d, %d) = %v, want %v", describe(s), w, lo, min(hi, ext), got, want)
			}
		}
	}
	// NextRoundOf, brute force from the end.
	cur := s.Current()
	for w := range workers {
		next, ok := int64(0), false
		for r := ext - 1; r >= -1; r-- {
			if r >= 0 && owner[r] == w {
				next, ok = r, true
			}
			if r < horizon || r == ext-1 {
				got, gotOK := s.NextRoundOf(w, r)
				wantNext, wantOK := next, ok
				if r >= horizon && !ok && slices.Contains(cur, w) {
					// Beyond the brute-force range: only check it is w's.
					if !gotOK || got < r || s.mustWorker(t, got) != w {
						t.Fatalf("%s: NextRoundOf(%q, %d) = %d, %v", describe(s), w, r, got, gotOK)
					}
				} else if got != wantNext || gotOK != wantOK {
					t.Fatalf("%s: NextRoundOf(%q, %d) = %d, %v; want %d, %v", describe(s), w, r, got, gotOK, wantNext, wantOK)
				}
			}
		}
	}
	// Compact keeps every round from keepFrom on.
	for range 3 {
		keep := rng.Int64N(horizon+2) - 1
		c := s.Compact(keep)
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: Compact(%d) = %s: %v", describe(s), keep, describe(c), err)
		}
		if len(c.Changes) > len(s.Changes) {
			t.Fatalf("Compact grew the schedule")
		}
		for r := max(keep, 0); r < ext; r++ {
			if got := c.mustWorker(t, r); got != owner[r] {
				t.Fatalf("%s: Compact(%d) = %s moved round %d from %q to %q", describe(s), keep, describe(c), r, owner[r], got)
			}
		}
	}
}

func (s Schedule) mustWorker(t testing.TB, r int64) string {
	t.Helper()
	w, err := s.WorkerFor(r)
	if err != nil {
		t.Fatalf("%s: round %d: %v", describe(s), r, err)
	}
	return w
}

// scheduleModel drives a Schedule through random worker additions and
// removals while consumers advance (minFrom only grows), checking each change
// against a model of the rotation and checking that no round a consumer may
// have reached changes hands.
type scheduleModel struct {
	t       testing.TB
	s       Schedule
	model   []string // the rotation the schedule should end with
	minFrom int64    // first round no consumer has reached
	kept    int64    // rounds below this were compacted away
}

// step applies one operation: op selects add, remove, compact, a change that
// is too early, or an eviction; w names the worker; delta moves consumers ahead and
// places the change.
func (m *scheduleModel) step(op int, w string, delta int64) {
	t := m.t
	t.Helper()
	m.minFrom += delta % 5
	from := m.s.EarliestFrom(m.minFrom) + (delta/5)%3
	old := m.s
	oldStr := describe(old)
	var next Schedule
	var err error
	switch op {
	case 0:
		next, err = m.s.AddWorker(w, from, m.minFrom)
		switch {
		case slices.Contains(m.model, w):
			if !errors.Is(err, ErrDuplicateWorker) {
				t.Fatalf("%s: adding %q again: %v", oldStr, w, err)
			}
		case err != nil:
			t.Fatalf("%s: AddWorker(%q, %d, %d): %v", oldStr, w, from, m.minFrom, err)
		default:
			m.model = append(m.model, w)
		}
	case 1:
		next, err = m.s.RemoveWorker(w, from, m.minFrom)
		k := slices.Index(m.model, w)
		switch {
		case k < 0:
			if !errors.Is(err, ErrUnknownWorker) {
				t.Fatalf("%s: removing unknown %q: %v", oldStr, w, err)
			}
		case len(m.model) == 1:
			if !errors.Is(err, ErrEmptyRotation) {
				t.Fatalf("%s: removing the last worker: %v", oldStr, err)
			}
		case err != nil:
			t.Fatalf("%s: RemoveWorker(%q, %d, %d): %v", oldStr, w, from, m.minFrom, err)
		default:
			m.model = slices.Delete(m.model, k, k+1)
			// The removed worker serves nothing from the change on.
			if r, ok := next.NextRoundOf(w, from); ok {
				t.Fatalf("%s: removed %q from %d still serves round %d", describe(next), w, from, r)
			}
		}
	case 4:
		// A worker dies: evicted from a round that may precede pending
		// changes.
		from = m.minFrom + (delta/5)%3
		next, err = m.s.Evict(w, from, m.minFrom)
		k := slices.Index(m.model, w)
		inAny, lonely := false, false // in a rotation in force from `from` on; alone in one
		for i := max(m.s.changeAt(from), 0); i < len(m.s.Changes); i++ {
			inAny = inAny || slices.Contains(m.s.Changes[i].Workers, w)
			lonely = lonely || slices.Equal(m.s.Changes[i].Workers, []string{w})
		}
		switch {
		case !inAny:
			if !errors.Is(err, ErrUnknownWorker) {
				t.Fatalf("%s: evicting %q from %d, which serves nothing: %v", oldStr, w, from, err)
			}
		case lonely:
			if !errors.Is(err, ErrEmptyRotation) {
				t.Fatalf("%s: Evict(%q, %d) would empty a rotation: %v", oldStr, w, from, err)
			}
		case err != nil:
			t.Fatalf("%s: Evict(%q, %d, %d): %v", oldStr, w, from, m.minFrom, err)
		default:
			if k >= 0 {
				m.model = slices.Delete(m.model, k, k+1)
			}
			for r := from; r < max(from, m.s.LastFrom())+2*int64(len(m.model))+2; r++ {
				want := slices.DeleteFunc(m.s.RotationAt(r), func(x string) bool { return x == w })
				if got := next.RotationAt(r); !slices.Equal(got, want) {
					t.Fatalf("%s: Evict(%q, %d) = %s: rotation at %d is %q, want %q", oldStr, w, from, describe(next), r, got, want)
				}
				if next.mustWorker(t, r) == w {
					t.Fatalf("%s: evicted %q from %d still serves round %d", describe(next), w, from, r)
				}
			}
		}
	case 2:
		// Compacting up to the slowest consumer is what the FSM does.
		m.s = m.s.Compact(m.minFrom)
		m.kept = max(m.kept, m.minFrom)
		if err := m.s.Validate(); err != nil {
			t.Fatalf("Compact(%d) of %s: %v", m.minFrom, oldStr, err)
		}
		from = m.s.EarliestFrom(m.minFrom) + 3 // rounds before this must not move
		next = m.s
	case 3:
		// Too early: before minFrom, or not after the last change.
		early := min(m.minFrom-1-delta%3, m.s.LastFrom())
		if _, err = m.s.AddWorker(w+"-new", early, m.minFrom); !errors.Is(err, ErrChangeTooEarly) {
			t.Fatalf("%s: AddWorker at %d with minFrom %d: %v", oldStr, early, m.minFrom, err)
		}
		if _, err = m.s.RemoveWorker(m.model[0], early, m.minFrom); !errors.Is(err, ErrChangeTooEarly) {
			t.Fatalf("%s: RemoveWorker at %d with minFrom %d: %v", oldStr, early, m.minFrom, err)
		}
		return
	}
	if describe(old) != oldStr {
		t.Fatalf("operation modified its receiver: %s became %s", oldStr, describe(old))
	}
	if err != nil {
		return
	}
	if from < m.minFrom {
		t.Fatalf("change from %d < minFrom %d", from, m.minFrom)
	}
	// No round before the change (in particular none a consumer may have
	// reached) changes hands.
	for r := m.kept; r < from; r++ {
		if a, b := old.mustWorker(t, r), next.mustWorker(t, r); a != b {
			t.Fatalf("round %d (minFrom %d) moved from %q to %q: %s -> %s", r, m.minFrom, a, b, oldStr, describe(next))
		}
	}
	if !slices.Equal(next.Current(), m.model) {
		t.Fatalf("%s: rotation %q, model %q", describe(next), next.Current(), m.model)
	}
	m.s = next
}

func TestScheduleProperties(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 6))
		first := []string{"w0", "w1", "w2"}[:1+rng.IntN(3)]
		s, err := NewSchedule(first)
		if err != nil {
			t.Fatal(err)
		}
		m := &scheduleModel{t: t, s: s, model: slices.Clone(first)}
		for range 5 + rng.IntN(40) {
			op := rng.IntN(12) // adds and removes most of the time
			switch {
			case op < 4:
				op = 0
			case op < 7:
				op = 1
			case op < 8:
				op = 2
			case op < 9:
				op = 3
			default:
				op = 4
			}
			m.step(op, fmt.Sprintf("w%d", rng.IntN(8)), rng.Int64N(30))
		}
		checkSchedule(t, m.s, m.s.LastFrom()+20, rng)
	}
}

func FuzzSchedule(f *testing.F) {
	f.Add([]byte{0, 3, 4, 0, 4, 9, 1, 0, 2, 2, 0, 0, 3, 1, 1})
	f.Add([]byte{1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 29})
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 3*64)]
		s, _ := NewSchedule([]string{"w0", "w1"})
		m := &scheduleModel{t: t, s: s, model: []string{"w0", "w1"}}
		for i := 0; i+2 < len(data); i += 3 {
			m.step(int(data[i]%5), fmt.Sprintf("w%d", data[i+1]%6), int64(data[i+2]))
		}
		checkSchedule(t, m.s, m.s.LastFrom()+12, rand.New(rand.NewPCG(uint64(len(data)), 1)))
	})
}

// FuzzScheduleRaw feeds schedules as they might arrive from a corrupted or
// hostile Raft log: no method may panic, and a schedule that validates must
// be self-consistent.
func FuzzScheduleRaw(f *testing.F) {
	f.Add([]byte{0, 2, 1, 2, 3, 1, 4}, int64(5), int64(9))
	f.Add([]byte{3, 1, 0}, int64(-1), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, data []byte, r, lo int64) {
		// data: (from delta, rotation size, workers...) repeated.
		var s Schedule
		from := int64(0)
		for i := 0; i < len(data) && len(s.Changes) < 16; {
			from += int64(int8(data[i]))
			n := 0
			if i+1 < len(data) {
				n = int(data[i+1] % 5)
			}
			i += 2
			var ws []string
			for ; n > 0 && i < len(data); n, i = n-1, i+1 {
				ws = append(ws, fmt.Sprintf("w%d", data[i]%4))
			}
			s.Changes = append(s.Changes, Change{From: from, Workers: ws})
		}
		_, _ = s.WorkerFor(r)
		s.RotationAt(r)
		s.Current()
		s.EarliestFrom(r)
		hi := lo
		if d := r & 255; lo <= math.MaxInt64-d {
			hi = lo + d
		}
		_ = s.RoundsOf("w1", lo, hi)
		s.NextRoundOf("w1", r)
		s.Compact(r)
		_, _ = s.AddWorker("w9", r, lo)
		_, _ = s.RemoveWorker("w1", r, lo)
		if s.Validate() == nil {
			checkSchedule(t, s, s.LastFrom()+8, rand.New(rand.NewPCG(uint64(r), uint64(lo))))
		}
	})
}

// BenchmarkWorkerFor: a schedule of 65 changes (rotations of 4 to 26), asked about
// rounds spread over its whole range (what a consumer asks once per round).
func BenchmarkWorkerFor(b *testing.B) {
	s, _ := NewSchedule([]string{"w0", "w1", "w2", "w3"})
	for i := range 64 {
		w := fmt.Sprintf("x%d", i)
		var err error
		if i%3 != 2 { // two joins, then one of them leaves

			s, err = s.AddWorker(w, int64(10*(i+1)), 0)
		} else {
			s, err = s.RemoveWorker(fmt.Sprintf("x%d", i-1), int64(10*(i+1)), 0)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; b.Loop(); i++ {
		if _, err := s.WorkerFor(int64(i % 700)); err != nil {
			b.Fatal(err)
		}
	}
}
