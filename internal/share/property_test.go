package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// model is what a checker knows about a window from the outside, used by the
// property and fuzz tests to check the invariants after every operation.
type model struct {
	w        *Window[item]
	max      int64
	maxItems int
	maxPos   int64            // the furthest position any cursor ever reached
	last     map[string]int64 // seq of each joined job's last read, -1 before
}

func newModel(maxBytes int64, maxItems int) *model {
	w := newWindow[item](maxBytes, maxItems)
	return &model{w: w, max: maxBytes, maxItems: maxItems, last: make(map[string]int64)}
}

func (m *model) join(job string) error {
	err := m.w.Join(job)
	if _, dup := m.last[job]; dup != errors.Is(err, ErrJobExists) {
		return fmt.Errorf("join %q: %v, already joined: %v", job, err, dup)
	}
	if err == nil {
		m.last[job] = -1
		js, _ := m.w.JobStats(job)
		if js.Position != m.w.Stats().Start {
			return fmt.Errorf("join %q at %d, window start %d", job, js.Position, m.w.Stats().Start)
		}
		// A job joining an empty window starts at the front, where earlier
		// (departed) cursors had taken production.
		m.maxPos = max(m.maxPos, js.Position)
	}
	return nil
}

func (m *model) leave(job string) {
	m.w.Leave(job)
	delete(m.last, job)
}

// next calls Next for job and checks what it returns; atFront reports that
// the job was told to produce.
func (m *model) next(job string) (atFront bool, err error) {
	before, joined := m.w.JobStats(job)
	st := m.w.Stats()
	it, ok, missed, err := m.w.Next(job)
	if !joined {
		if !errors.Is(err, ErrUnknownJob) || ok {
			return false, fmt.Errorf("next of unknown %q: ok %v err %v", job, ok, err)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("next %q: %v", job, err)
	}
	wantMissed := max(st.Start-before.Position, 0)
	if missed != wantMissed {
		return false, fmt.Errorf("next %q at %d (window [%d,%d)): missed %d, want %d", job, before.Position, st.Start, st.End, missed, wantMissed)
	}
	behind := max(before.Position, st.Start) < st.End
	if behind != ok {
		// ok=false for a job behind the front would make it produce (or
		// wait) although items are cached for it: blocked by the others.
		return false, fmt.Errorf("next %q at %d (window [%d,%d)): ok %v", job, before.Position, st.Start, st.End, ok)
	}
	if ok {
		if it.seq != before.Position+missed {
			return false, fmt.Errorf("next %q at %d: got item %d (missed %d)", job, before.Position, it.seq, missed)
		}
		if it.seq <= m.last[job] {
			return false, fmt.Errorf("next %q: item %d after item %d: out of order or duplicate", job, it.seq, m.last[job])
		}
		m.last[job] = it.seq
		m.maxPos = max(m.maxPos, it.seq+1)
	}
	after, _ := m.w.JobStats(job)
	if after.Read != after.Hits+after.Produced || after.Read != before.Read+b2i(ok) ||
		after.EvictedBeforeRead != before.EvictedBeforeRead+missed {
		return false, fmt.Errorf("next %q: stats %+v -> %+v", job, before, after)
	}
	return !ok, m.check()
}

// produce pushes the item job was told to produce and has job read it.
func (m *model) produce(job string, size int64) error {
	end := m.w.Stats().End
	_, err := m.w.Push(item{seq: end, size: size})
	switch {
	case size > m.max:
		if !errors.Is(err, ErrItemTooLarge) || m.w.Stats().End != end {
			return fmt.Errorf("push of %d bytes into %d: %v", size, m.max, err)
		}
		return m.check()
	case err != nil:
		return fmt.Errorf("push by %q at the front: %v", job, err)
	}
	if err := m.check(); err != nil {
		return err
	}
	it, ok, missed, err := m.w.Next(job)
	if err != nil || !ok || missed != 0 || it.seq != end {
		return fmt.Errorf("%q cannot read what it produced: %+v %v %d %v", job, it, ok, missed, err)
	}
	js, _ := m.w.JobStats(job)
	if js.Produced == 0 {
		return fmt.Errorf("%q produced but its stats say %+v", job, js)
	}
	m.last[job] = it.seq
	m.maxPos = max(m.maxPos, it.seq+1)
	return m.check()
}

// check holds at every point between operations.
func (m *model) check() error {
	st := m.w.Stats()
	switch {
	case st.Bytes > m.max || st.Bytes < 0:
		return fmt.Errorf("window holds %d bytes, bound %d", st.Bytes, m.max)
	case st.Len > m.maxItems:
		return fmt.Errorf("window holds %d items, bound %d", st.Len, m.maxItems)
	case st.End-st.Start != int64(st.Len) || st.Start < 0:
		return fmt.Errorf("window [%d,%d) holds %d items", st.Start, st.End, st.Len)
	case st.Produced > m.maxPos+1:
		// A pushed item not read yet by its producer is the only slack.
		return fmt.Errorf("produced %d, furthest cursor %d", st.Produced, m.maxPos)
	case st.Jobs != len(m.last):
		return fmt.Errorf("%d jobs, model has %d", st.Jobs, len(m.last))
	case st.Jobs == 0 && (st.Len != 0 || st.Bytes != 0):
		return fmt.Errorf("no jobs but %d items (%d bytes) retained", st.Len, st.Bytes)
	}
	var sum int64
	for i := range st.Len {
		it := m.w.items.at(i)
		if it.seq != st.Start+int64(i) {
			return fmt.Errorf("retained item %d has seq %d, window starts at %d", i, it.seq, st.Start)
		}
		sum += it.size
	}
	if sum != st.Bytes {
		return fmt.Errorf("retained items sum to %d bytes, Bytes() = %d", sum, st.Bytes)
	}
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestWindowRandomInterleavings drives k jobs of different speeds through
// the read protocol (Next; at the front Push then Next) in random orders,
// with jobs joining and leaving, and checks the invariants after each step.
func TestWindowRandomInterleavings(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 50
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0x5ea))
		k := 1 + rng.IntN(8)
		maxBytes := int64(1 + rng.IntN(200))
		m := newModel(maxBytes, 1+rng.IntN(64))
		jobs := make([]string, k)
		speed := make([]int, k) // relative read rates: slow jobs lose items
		for i := range jobs {
			jobs[i] = fmt.Sprintf("job%d", i)
			speed[i] = 1 + rng.IntN(10)
			if err := m.join(jobs[i]); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		steps := 3000
		if testing.Short() {
			steps = 500
		}
		for s := range steps {
			j := pickWeighted(rng, speed)
			job := jobs[j]
			var err error
			switch r := rng.IntN(100); {
			case r < 2:
				m.leave(job)
			case r < 4:
				err = m.join(job)
			default:
				var front bool
				if front, err = m.next(job); err == nil && front {
					size := int64(rng.IntN(int(maxBytes)/2 + 1))
					if rng.IntN(50) == 0 {
						size = maxBytes + 1 + int64(rng.IntN(10))
					}
					err = m.produce(job, size)
				}
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, s, err)
			}
		}
		// Under the protocol, every production is read at once by its
		// producer: produced equals the furthest cursor's progress exactly.
		if st := m.w.Stats(); st.Produced != m.maxPos {
			t.Fatalf("seed %d: produced %d, furthest cursor reached %d", seed, st.Produced, m.maxPos)
		}
	}
}

func pickWeighted(rng *rand.Rand, w []int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	r := rng.IntN(total)
	for i, x := range w {
		if r < x {
			return i
		}
		r -= x
	}
	return len(w) - 1
}

// TestWindowFastJobNeverWaits: a job that reads alone for a long time while
// another never reads is never told anything but "produce" and always gets
// its item; the idle job then finds only the window's tail.
func TestWindowFastJobNeverWaits(t *testing.T) {
	m := newModel(1000, DefaultMaxItems)
	for _, j := range []string{"fast", "idle"} {
		if err := m.join(j); err != nil {
			t.Fatal(err)
		}
	}
	for range 10_000 {
		front, err := m.next("fast")
		if err != nil || !front {
			t.Fatalf("fast job: front %v err %v", front, err)
		}
		if err := m.produce("fast", 100); err != nil {
			t.Fatal(err)
		}
	}
	_, ok, missed, err := m.w.Next("idle")
	if err != nil || !ok || missed != 10_000-10 {
		t.Fatalf("idle job: ok %v missed %d err %v", ok, missed, err)
	}
}
