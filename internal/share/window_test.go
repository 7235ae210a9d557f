package share

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// step is one operation on a window and what it must return. Fields left
// zero are expected to be zero.
type step struct {
	op   string // join, leave, next, push
	job  string
	size int64 // push: the item's size (its seq is the window's End)

	ok      bool  // next
	seq     int64 // next, if ok
	missed  int64 // next
	evicted int   // push
	err     error // join, next, push: errors.Is target

	len   int   // after the step
	bytes int64 // after the step
}

func TestWindowTable(t *testing.T) {
	tests := []struct {
		name  string
		max   int64
		steps []step
	}{
		{"join at front, produce, read", 100, []step{
			{op: "join", job: "a"},
			{op: "next", job: "a"},
			{op: "push", size: 10, len: 1, bytes: 10},
			{op: "next", job: "a", ok: true, seq: 0, len: 1, bytes: 10},
			{op: "next", job: "a", len: 1, bytes: 10},
		}},
		{"second job hits the cached item", 100, []step{
			{op: "join", job: "a"},
			{op: "join", job: "b"},
			{op: "next", job: "a"},
			{op: "push", size: 10, len: 1, bytes: 10},
			{op: "next", job: "a", ok: true, seq: 0, len: 1, bytes: 10},
			{op: "next", job: "b", ok: true, seq: 0, len: 1, bytes: 10},
			{op: "next", job: "b", len: 1, bytes: 10},
		}},
		{"late job joins at the oldest retained item", 100, []step{
			{op: "join", job: "a"},
			{op: "push", size: 40, len: 1, bytes: 40},
			{op: "next", job: "a", ok: true, seq: 0, len: 1, bytes: 40},
			{op: "push", size: 40, len: 2, bytes: 80},
			{op: "next", job: "a", ok: true, seq: 1, len: 2, bytes: 80},
			{op: "push", size: 40, evicted: 1, len: 2, bytes: 80},
			{op: "next", job: "a", ok: true, seq: 2, len: 2, bytes: 80},
			{op: "join", job: "b", len: 2, bytes: 80},
			{op: "next", job: "b", ok: true, seq: 1, len: 2, bytes: 80},
		}},
		{"eviction makes a slow job skip", 100, []step{
			{op: "join", job: "fast"},
			{op: "join", job: "slow"},
			{op: "push", size: 50, len: 1, bytes: 50},
			{op: "next", job: "fast", ok: true, seq: 0, len: 1, bytes: 50},
			{op: "push", size: 50, len: 2, bytes: 100},
			{op: "next", job: "fast", ok: true, seq: 1, len: 2, bytes: 100},
			{op: "push", size: 50, evicted: 1, len: 2, bytes: 100},
			{op: "next", job: "fast", ok: true, seq: 2, len: 2, bytes: 100},
			{op: "push", size: 100, evicted: 2, len: 1, bytes: 100},
			{op: "next", job: "fast", ok: true, seq: 3, len: 1, bytes: 100},
			{op: "next", job: "slow", ok: true, seq: 3, missed: 3, len: 1, bytes: 100},
			{op: "next", job: "slow", len: 1, bytes: 100},
		}},
		{"skip into an empty window reports the loss and asks to produce", 10, []step{
			{op: "join", job: "a"},
			{op: "join", job: "b"},
			{op: "push", size: 10, len: 1, bytes: 10},
			{op: "next", job: "a", ok: true, seq: 0, len: 1, bytes: 10},
			{op: "push", size: 10, evicted: 1, len: 1, bytes: 10},
			{op: "next", job: "a", ok: true, seq: 1, len: 1, bytes: 10},
			{op: "next", job: "b", ok: true, seq: 1, missed: 1, len: 1, bytes: 10},
		}},
		{"item exactly the window size fits", 64, []step{
			{op: "join", job: "a"},
			{op: "push", size: 64, len: 1, bytes: 64},
		}},
		{"item larger than the window is refused and changes nothing", 64, []step{
			{op: "join", job: "a"},
			{op: "push", size: 10, len: 1, bytes: 10},
			{op: "next", job: "a", ok: true, seq: 0, len: 1, bytes: 10},
			{op: "push", size: 65, err: ErrItemTooLarge, len: 1, bytes: 10},
			{op: "next", job: "a", len: 1, bytes: 10},
			{op: "push", size: 1, len: 2, bytes: 11},
			{op: "next", job: "a", ok: true, seq: 1, len: 2, bytes: 11},
		}},
		{"negative size is refused", 64, []step{
			{op: "join", job: "a"},
			{op: "push", size: -1, err: ErrBadItem},
		}},
		{"push without demand is refused", 100, []step{
			{op: "push", size: 1, err: ErrNoDemand},
			{op: "join", job: "a"},
			{op: "push", size: 1, len: 1, bytes: 1},
			{op: "push", size: 1, err: ErrNoDemand, len: 1, bytes: 1},
		}},
		{"unknown job", 100, []step{
			{op: "next", job: "nobody", err: ErrUnknownJob},
			{op: "join", job: "a"},
			{op: "leave", job: "a"},
			{op: "next", job: "a", err: ErrUnknownJob},
			{op: "leave", job: "nobody"},
		}},
		{"joining twice", 100, []step{
			{op: "join", job: "a"},
			{op: "join", job: "a", err: ErrJobExists},
		}},
		{"last leave releases every item, positions keep counting", 100, []step{
			{op: "join", job: "a"},
			{op: "join", job: "b"},
			{op: "push", size: 30, len: 1, bytes: 30},
			{op: "next", job: "a", ok: true, seq: 0, len: 1, bytes: 30},
			{op: "push", size: 30, len: 2, bytes: 60},
			{op: "next", job: "a", ok: true, seq: 1, len: 2, bytes: 60},
			{op: "leave", job: "a", len: 2, bytes: 60},
			{op: "leave", job: "b"},
			{op: "join", job: "c"},
			{op: "next", job: "c"},
			{op: "push", size: 5, len: 1, bytes: 5},
			{op: "next", job: "c", ok: true, seq: 2, len: 1, bytes: 5},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWindow[item](tc.max)
			for i, s := range tc.steps {
				runStep(t, w, i, s)
			}
		})
	}
}

func runStep(t *testing.T, w *Window[item], i int, s step) {
	t.Helper()
	var err error
	switch s.op {
	case "join":
		err = w.Join(s.job)
	case "leave":
		w.Leave(s.job)
	case "next":
		var it item
		var ok bool
		var missed int64
		it, ok, missed, err = w.Next(s.job)
		if ok != s.ok || missed != s.missed || (ok && it.seq != s.seq) {
			t.Fatalf("step %d %+v: Next = (%+v, %v, missed %d)", i, s, it, ok, missed)
		}
	case "push":
		var ev int
		ev, err = w.Push(item{seq: w.Stats().End, size: s.size})
		if ev != s.evicted {
			t.Fatalf("step %d %+v: Push evicted %d", i, s, ev)
		}
	default:
		t.Fatalf("step %d: bad op %q", i, s.op)
	}
	if !errors.Is(err, s.err) || (err == nil) != (s.err == nil) {
		t.Fatalf("step %d %+v: err = %v", i, s, err)
	}
	if w.Len() != s.len || w.Bytes() != s.bytes {
		t.Fatalf("step %d %+v: Len %d Bytes %d", i, s, w.Len(), w.Bytes())
	}
	if st := w.Stats(); st.Len != w.Len() || st.Bytes != w.Bytes() || st.End-st.Start != int64(st.Len) || st.Bytes > st.MaxBytes {
		t.Fatalf("step %d: inconsistent stats %+v", i, st)
	}
}

func TestWindowItemTooLargeMessage(t *testing.T) {
	w := NewWindow[item](1000)
	if err := w.Join("a"); err != nil {
		t.Fatal(err)
	}
	_, err := w.Push(item{size: 4096})
	if !errors.Is(err, ErrItemTooLarge) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"4096", "1000", "window_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestWindowJobStats(t *testing.T) {
	w := NewWindow[item](30)
	for _, j := range []string{"a", "b"} {
		if err := w.Join(j); err != nil {
			t.Fatal(err)
		}
	}
	// a produces 5 items of 10 bytes; the window keeps the last 3.
	for range 5 {
		if _, ok, _, _ := w.Next("a"); ok {
			t.Fatal("a was not at the front")
		}
		if _, err := w.Push(item{seq: w.Stats().End, size: 10}); err != nil {
			t.Fatal(err)
		}
		if _, ok, _, _ := w.Next("a"); !ok {
			t.Fatal("a cannot read what it produced")
		}
	}
	var got []int64
	for {
		it, ok, _, err := w.Next("b")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, it.seq)
	}
	if !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("b read %v", got)
	}
	a, _ := w.JobStats("a")
	b, _ := w.JobStats("b")
	if want := (JobStats{Produced: 5, Read: 5, Position: 5}); a != want {
		t.Errorf("a: %+v, want %+v", a, want)
	}
	if want := (JobStats{Hits: 3, EvictedBeforeRead: 2, Read: 3, Position: 5}); b != want {
		t.Errorf("b: %+v, want %+v", b, want)
	}
	if _, ok := w.JobStats("c"); ok {
		t.Error("stats for a job that never joined")
	}
	st := w.Stats()
	if want := (WindowStats{Produced: 5, Evicted: 2, Bytes: 30, MaxBytes: 30, Len: 3, Start: 2, End: 5, Jobs: 2}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if jobs := w.Jobs(); !slices.Equal(jobs, []string{"a", "b"}) {
		t.Errorf("Jobs() = %v", jobs)
	}
	w.Leave("b")
	w.Leave("a")
	st = w.Stats()
	if st.Len != 0 || st.Bytes != 0 || st.Released != 3 || st.Jobs != 0 || st.Start != 5 {
		t.Errorf("after the last leave: %+v", st)
	}
}

func TestWindowMaxItems(t *testing.T) {
	w, err := NewWindowConfig[item](Config{WindowBytes: 1 << 20, MaxItems: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Join("a"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		w.Next("a")
		if _, err := w.Push(item{seq: w.Stats().End}); err != nil { // empty items
			t.Fatal(err)
		}
		w.Next("a")
		if w.Len() > 2 {
			t.Fatalf("Len %d over MaxItems", w.Len())
		}
	}
	if st := w.Stats(); st.Evicted != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), FastConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if DefaultConfig().WindowBytes != 256<<20 {
		t.Errorf("default window %d", DefaultConfig().WindowBytes)
	}
	err := Config{}.Validate()
	if err == nil || !strings.Contains(err.Error(), "WindowBytes") || !strings.Contains(err.Error(), "MaxItems") {
		t.Errorf("zero config: %v", err)
	}
	if _, err := NewWindowConfig[item](Config{WindowBytes: -1, MaxItems: 1}); err == nil {
		t.Error("NewWindowConfig accepted a negative window")
	}
}

// TestRingGrowWrap checks the ring across growth while wrapped.
func TestRingGrowWrap(t *testing.T) {
	var r ring[int]
	next, first := 0, 0
	for round := range 200 {
		for range round%7 + 1 {
			r.push(next, 1)
			next++
		}
		for range round % 5 {
			if r.len() == 0 {
				break
			}
			r.pop()
			first++
		}
		for i := range r.len() {
			if r.at(i) != first+i {
				t.Fatalf("round %d: at(%d) = %d, want %d", round, i, r.at(i), first+i)
			}
		}
	}
}
