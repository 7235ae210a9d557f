package bucketing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestNewGrouper(t *testing.T) {
	cases := []struct {
		m, maxPending int
		msg           string // "" means accepted
	}{
		{1, 0, ""},
		{4, 3, ""},
		{4, 100, ""},
		{0, 10, "m (consumers per round): must be >= 1, got 0"},
		{-2, 10, "must be >= 1"},
		{4, 2, "maxPending: must be >= m-1 (3)"},
		{1, -1, "maxPending: must be >= m-1 (0)"},
	}
	for _, c := range cases {
		g, err := NewGrouper[string](c.m, c.maxPending)
		if c.msg == "" && (err != nil || g == nil) {
			t.Errorf("NewGrouper(%d, %d): %v", c.m, c.maxPending, err)
		}
		if c.msg != "" && (err == nil || !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("NewGrouper(%d, %d) = %v, want %q", c.m, c.maxPending, err, c.msg)
		}
	}
}

// groupScript runs adds of "bucket:name" through a Grouper and renders what
// came out: "b2[x y]" per emitted window, "full" for a rejected add.
func groupScript(t *testing.T, g *Grouper[string], adds string) string {
	t.Helper()
	var out []string
	for _, a := range strings.Fields(adds) {
		var b int
		var name string
		if _, err := fmt.Sscanf(strings.Replace(a, ":", " ", 1), "%d %s", &b, &name); err != nil {
			t.Fatalf("bad script entry %q", a)
		}
		w, ok, err := g.Add(b, name)
		switch {
		case errors.Is(err, ErrGrouperFull):
			out = append(out, "full")
		case err != nil:
			out = append(out, "err")
		case ok:
			out = append(out, renderWindow(w))
		}
	}
	return strings.Join(out, " ")
}

func renderWindow(w Window[string]) string {
	s := fmt.Sprintf("b%d%v", w.Bucket, w.Batches)
	if w.Padded > 0 {
		s += fmt.Sprintf("+%d", w.Padded)
	}
	return s
}

func TestGrouper(t *testing.T) {
	pad := func(b int) string { return fmt.Sprintf("pad%d", b) }
	cases := []struct {
		name          string
		m, maxPending int
		adds          string
		want          string // windows emitted by Add
		pending       int    // after the adds
		flush         string // Flush(pad, false)
	}{
		{"m=1 emits every batch", 1, 0, "0:a 3:b 0:c", "b0[a] b3[b] b0[c]", 0, ""},
		{"m=4 one bucket", 4, 3, "2:a 2:b 2:c 2:d 2:e", "b2[a b c d]", 1, "b2[e pad2 pad2 pad2]+3"},
		{"m=4 interleaved", 4, 100,
			"0:a 1:b 0:c 2:d 1:e 0:f 1:g 2:h 0:i 1:j 5:k",
			"b0[a c f i] b1[b e g j]", 3, "b2[d h pad2 pad2]+2 b5[k pad5 pad5 pad5]+3"},
		{"many buckets, m=2", 2, 100,
			"9:a 8:b 7:c 6:d 5:e 4:f 3:g 2:h 1:i 0:j 0:k 9:l 5:m",
			"b0[j k] b9[a l] b5[e m]", 7,
			"b1[i pad1]+1 b2[h pad2]+1 b3[g pad3]+1 b4[f pad4]+1 b6[d pad6]+1 b7[c pad7]+1 b8[b pad8]+1"},
		{"full rejects, completing a window is allowed", 3, 2,
			"0:a 0:b 1:c 0:d 1:e",
			"full b0[a b d]", 1, "b1[e pad1 pad1]+2"},
		{"negative bucket", 2, 4, "-1:a 0:b", "err", 1, "b0[b pad0]+1"},
	}
	for _, c := range cases {
		g, err := NewGrouper[string](c.m, c.maxPending)
		if err != nil {
			t.Fatal(err)
		}
		if got := groupScript(t, g, c.adds); got != c.want {
			t.Errorf("%s: Add emitted %q, want %q", c.name, got, c.want)
		}
		if g.Pending() != c.pending {
			t.Errorf("%s: Pending = %d, want %d", c.name, g.Pending(), c.pending)
		}
		var fl []string
		for _, w := range g.Flush(pad, false) {
			fl = append(fl, renderWindow(w))
		}
		if got := strings.Join(fl, " "); got != c.flush {
			t.Errorf("%s: Flush = %q, want %q", c.name, got, c.flush)
		}
		if g.Pending() != 0 || len(g.Flush(pad, false)) != 0 {
			t.Errorf("%s: Flush did not empty the grouper", c.name)
		}
	}
}

func TestGrouperFullCase(t *testing.T) {
	// Spelled out: m=3, maxPending=2.
	g, _ := NewGrouper[string](3, 2)
	steps := []struct {
		bucket int
		want   string // "", "full" or the window
	}{
		{0, ""}, {1, ""}, // holds 2 = maxPending
		{2, "full"}, {0, "full"}, // 0 holds 1: adding makes 2 of 3, not a window
		{1, "full"},
	}
	for i, s := range steps {
		w, ok, err := g.Add(s.bucket, fmt.Sprint(i))
		got := ""
		if errors.Is(err, ErrGrouperFull) {
			got = "full"
		} else if ok {
			got = renderWindow(w)
		}
		if got != s.want || g.Pending() > 2 {
			t.Fatalf("step %d (bucket %d): got %q, want %q (pending %d)", i, s.bucket, got, s.want, g.Pending())
		}
	}
}

func TestGrouperFlushDropAndZeroPad(t *testing.T) {
	g, _ := NewGrouper[[]int](3, 10)
	for _, b := range []int{4, 1, 4, 2, 2, 2} {
		g.Add(b, []int{b})
	}
	// Bucket 2 emitted a window; 1 and 4 are partial.
	ws := g.Flush(nil, false)
	if len(ws) != 2 || ws[0].Bucket != 1 || ws[1].Bucket != 4 {
		t.Fatalf("Flush = %v", ws)
	}
	if ws[0].Padded != 2 || ws[0].Batches[1] != nil || ws[0].Batches[2] != nil || ws[1].Padded != 1 || len(ws[1].Batches) != 3 {
		t.Errorf("nil pad should fill with zero values: %v", ws)
	}

	for _, b := range []int{4, 1, 4, 7} {
		g.Add(b, []int{b})
	}
	if ws := g.Flush(func(int) []int { t.Fatal("pad called while dropping"); return nil }, true); ws != nil {
		t.Errorf("Flush(drop) = %v, want nil", ws)
	}
	if g.Dropped() != 4 || g.Pending() != 0 {
		t.Errorf("Dropped = %d, Pending = %d; want 4, 0", g.Dropped(), g.Pending())
	}
}

type tagged struct{ id, bucket int } // id -1: a filler from Flush

// checkGrouper adds items (bucket per entry) to a Grouper(m, maxPending) and
// checks: every accepted item is in exactly one window or dropped by
// Flush(drop); a rejected item was rejected only at maxPending; every window
// has m batches of its bucket, in arrival order, fillers last; Pending never
// exceeds maxPending.
func checkGrouper(t *testing.T, m, maxPending int, buckets []int, drop bool) {
	t.Helper()
	g, err := NewGrouper[tagged](m, maxPending)
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[int]bool{}
	held := map[int]int{} // per bucket, the model of what the grouper holds
	var windows []Window[tagged]
	for id, b := range buckets {
		before := g.Pending()
		w, ok, err := g.Add(b, tagged{id, b})
		switch {
		case errors.Is(err, ErrGrouperFull):
			if before != maxPending || held[b]+1 == m {
				t.Fatalf("rejected item %d of bucket %d with %d pending (max %d), %d of the bucket", id, b, before, maxPending, held[b])
			}
		case err != nil:
			if b >= 0 {
				t.Fatalf("Add(%d): %v", b, err)
			}
		default:
			if b < 0 {
				t.Fatalf("Add(%d) accepted a negative bucket", b)
			}
			accepted[id] = true
			held[b]++
			if ok != (held[b] == m) {
				t.Fatalf("item %d: window emitted %v with %d of bucket %d held, m=%d", id, ok, held[b], b, m)
			}
			if ok {
				held[b] = 0
				windows = append(windows, w)
			}
		}
		if g.Pending() > maxPending {
			t.Fatalf("Pending %d > maxPending %d", g.Pending(), maxPending)
		}
	}
	pendingAtEnd := g.Pending()
	fillers := 0
	flushed := g.Flush(func(b int) tagged { fillers++; return tagged{-1, b} }, drop)
	if drop && (flushed != nil || g.Dropped() != int64(pendingAtEnd)) {
		t.Fatalf("Flush(drop) returned %d windows, dropped %d of %d", len(flushed), g.Dropped(), pendingAtEnd)
	}
	for i := 1; i < len(flushed); i++ {
		if flushed[i].Bucket <= flushed[i-1].Bucket {
			t.Fatalf("Flush not in bucket order: %v", flushed)
		}
	}
	seen := map[int]bool{}
	padded := 0
	for _, w := range append(windows, flushed...) {
		if len(w.Batches) != m {
			t.Fatalf("window of %d batches, m=%d", len(w.Batches), m)
		}
		padded += w.Padded
		for i, x := range w.Batches {
			if x.bucket != w.Bucket {
				t.Fatalf("window of bucket %d holds a batch of bucket %d", w.Bucket, x.bucket)
			}
			if isFill := i >= m-w.Padded; isFill != (x.id == -1) {
				t.Fatalf("window %v: batch %d filler=%v, Padded=%d", w, i, x.id == -1, w.Padded)
			}
			if x.id == -1 {
				continue
			}
			if seen[x.id] || !accepted[x.id] {
				t.Fatalf("item %d emitted twice or never accepted", x.id)
			}
			seen[x.id] = true
			if i > 0 && x.id <= w.Batches[i-1].id {
				t.Fatalf("window %v not in arrival order", w)
			}
		}
	}
	if fillers != padded {
		t.Fatalf("pad called %d times for %d padded batches", fillers, padded)
	}
	if lost := len(accepted) - len(seen); (drop && int64(lost) != g.Dropped()) || (!drop && lost != 0) {
		t.Fatalf("%d accepted items not emitted (drop=%v, dropped %d)", lost, drop, g.Dropped())
	}
	if g.Pending() != 0 {
		t.Fatalf("Pending %d after Flush", g.Pending())
	}
}

func TestGrouperProperties(t *testing.T) {
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		m := 1 + rng.IntN(8)
		nb := 1 + rng.IntN(6)
		maxPending := m - 1 + rng.IntN((m-1)*nb+3)
		buckets := make([]int, rng.IntN(400))
		for i := range buckets {
			buckets[i] = rng.IntN(nb)
			if rng.IntN(50) == 0 {
				buckets[i] = -1
			}
		}
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			checkGrouper(t, m, maxPending, buckets, rng.IntN(2) == 0)
		})
	}
}

func FuzzGrouper(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 0, 3, 3, 3, 3}, uint8(4), uint8(5), false)
	f.Add([]byte{0, 0, 0}, uint8(1), uint8(0), true)
	f.Add([]byte{5, 4, 3, 2, 1, 0, 5, 255}, uint8(2), uint8(3), true)
	f.Fuzz(func(t *testing.T, data []byte, m, extra uint8, drop bool) {
		mm := 1 + int(m%16)
		buckets := make([]int, len(data))
		for i, b := range data {
			buckets[i] = int(b%12) - 1 // some -1s
		}
		checkGrouper(t, mm, mm-1+int(extra%32), buckets, drop)
	})
}

func TestGrouperDoesNotShareWindows(t *testing.T) {
	g, _ := NewGrouper[int](2, 4)
	g.Add(0, 1)
	w1, _, _ := g.Add(0, 2)
	g.Add(0, 3)
	w2, _, _ := g.Add(0, 4)
	if !slices.Equal(w1.Batches, []int{1, 2}) || !slices.Equal(w2.Batches, []int{3, 4}) {
		t.Errorf("windows share storage: %v %v", w1, w2)
	}
}

// BenchmarkGrouperAdd: m=8 consumers, 8 buckets, round-robin over buckets.
func BenchmarkGrouperAdd(b *testing.B) {
	g, _ := NewGrouper[int](8, 7*8)
	for i := 0; b.Loop(); i++ {
		if _, _, err := g.Add(i%8, i); err != nil {
			b.Fatal(err)
		}
	}
}
