package bucketing

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

func TestIndex(t *testing.T) {
	b := []int64{32, 64, 128}
	cases := []struct {
		length int64
		want   int
	}{
		{0, 0}, {1, 0}, {32, 0}, {33, 1}, {64, 1}, {65, 2}, {128, 2}, {129, 3}, {1 << 40, 3}, {-5, 0},
	}
	for _, c := range cases {
		if got := Index(c.length, b); got != c.want {
			t.Errorf("Index(%d) = %d, want %d", c.length, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		b, s []int64
		want string
	}{
		{nil, []int64{1}, "boundaries: must not be empty"},
		{[]int64{0}, []int64{1, 1}, "boundaries[0]: must be > 0, got 0"},
		{[]int64{4, 4}, []int64{1, 1, 1}, "boundaries[1]: must be greater than boundaries[0] (4), got 4"},
		{[]int64{4}, []int64{1}, "batch_sizes: want 2 entries (one per bucket: len(boundaries)+1), got 1"},
		{[]int64{4}, []int64{1, 0}, "batch_sizes[1]: must be > 0, got 0"},
	}
	for _, c := range bad {
		err := Validate(c.b, c.s)
		if err == nil || err.Error() != c.want {
			t.Errorf("Validate(%v, %v) = %v, want %q", c.b, c.s, err, c.want)
		}
	}
	if err := Validate([]int64{1, 2}, []int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
}

// Property: every item comes out exactly once, full batches have their
// bucket's size, every batch holds one bucket's items in arrival order, and
// at most one partial batch per bucket remains for Flush.
func TestBucketerProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		nb := 1 + r.IntN(4)
		bounds := make([]int64, nb)
		sizes := make([]int64, nb+1)
		for i := range bounds {
			bounds[i] = int64(i+1) * int64(1+r.IntN(10))
			if i > 0 && bounds[i] <= bounds[i-1] {
				bounds[i] = bounds[i-1] + 1
			}
		}
		for i := range sizes {
			sizes[i] = int64(1 + r.IntN(6))
		}
		b, err := New[int](bounds, sizes)
		if err != nil {
			t.Fatal(err)
		}
		n := r.IntN(300)
		lengths := make([]int64, n)
		var batches []Batch[int]
		for i := 0; i < n; i++ {
			lengths[i] = int64(r.IntN(int(bounds[nb-1]) + 10))
			if batch, ok := b.Add(lengths[i], i); ok {
				if int64(len(batch.Items)) != sizes[batch.Bucket] {
					t.Fatalf("full batch of %d in bucket %d of size %d", len(batch.Items), batch.Bucket, sizes[batch.Bucket])
				}
				batches = append(batches, batch)
			}
			if b.Pending() > int(sum(sizes))-len(sizes) {
				t.Fatalf("holding %d items, bound %d", b.Pending(), sum(sizes)-int64(len(sizes)))
			}
		}
		rest := b.Flush()
		for i, p := range rest {
			if int64(len(p.Items)) >= sizes[p.Bucket] || (i > 0 && p.Bucket <= rest[i-1].Bucket) {
				t.Fatalf("bad remainder %+v", rest)
			}
		}
		if b.Pending() != 0 || len(b.Flush()) != 0 {
			t.Fatal("Flush did not empty the bucketer")
		}
		seen := make([]bool, n)
		for _, batch := range append(batches, rest...) {
			for k, i := range batch.Items {
				if seen[i] {
					t.Fatalf("item %d twice", i)
				}
				seen[i] = true
				if Index(lengths[i], bounds) != batch.Bucket {
					t.Fatalf("item of length %d in bucket %d", lengths[i], batch.Bucket)
				}
				if k > 0 && i <= batch.Items[k-1] {
					t.Fatal("batch not in arrival order")
				}
			}
		}
		for i, s := range seen {
			if !s {
				t.Fatalf("item %d lost", i)
			}
		}
	}
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func vec(t *testing.T, name string, v ...int32) tensor.Tensor {
	x, err := tensor.FromInt32s(name, nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func el(ts ...tensor.Tensor) tensor.Element { return tensor.Element{Tensors: ts} }

func TestStack(t *testing.T) {
	out, err := Stack([]tensor.Element{
		el(vec(t, "a", 1, 2), tensor.BytesScalar("s", []byte("xy")), tensor.ScalarInt64("id", 7)),
		el(vec(t, "a", 3, 4), tensor.BytesScalar("s", []byte("")), tensor.ScalarInt64("id", 8)),
		el(vec(t, "a", 5, 6), tensor.BytesScalar("s", []byte("z")), tensor.ScalarInt64("id", 9)),
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := out.Get("a")
	av, _ := a.Int32s()
	if !slices.Equal(a.Shape, []int64{3, 2}) || !slices.Equal(av, []int32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("a = %v %v", a.Shape, av)
	}
	s, _ := out.Get("s")
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Shape, []int64{3}) || string(s.Entry(0)) != "xy" || string(s.Entry(1)) != "" || string(s.Entry(2)) != "z" {
		t.Fatalf("s = %+v", s)
	}
	id, _ := out.Get("id")
	if iv, _ := id.Int64s(); !slices.Equal(iv, []int64{7, 8, 9}) {
		t.Fatalf("id = %v", iv)
	}
	for _, bad := range [][]tensor.Element{
		{el(vec(t, "a", 1)), el(vec(t, "a", 1, 2))},                                                                 // shape
		{el(vec(t, "a", 1)), el(vec(t, "b", 1))},                                                                    // name
		{el(vec(t, "a", 1)), el(tensor.ScalarInt64("a", 1))},                                                        // rank
		{el(vec(t, "a", 1)), el(tensor.Tensor{Name: "a", DType: tensor.Int32, Shape: []int64{1}, Data: []byte{1}})}, // buffer
		nil,
	} {
		if _, err := Stack(bad); err == nil {
			t.Errorf("Stack(%v) succeeded", bad)
		}
	}
}

func TestPad(t *testing.T) {
	m1, _ := tensor.FromInt32s("m", []int64{1, 2}, []int32{1, 2})
	m2, _ := tensor.FromInt32s("m", []int64{2, 1}, []int32{3, 4})
	out, err := Pad([]tensor.Element{
		el(vec(t, "tok", 1), m1, tensor.BytesVector("w", [][]byte{[]byte("a")})),
		el(vec(t, "tok", 2, 2, 2), m2, tensor.BytesVector("w", [][]byte{[]byte("b"), []byte("c")})),
		el(vec(t, "tok"), m1, tensor.BytesVector("w", nil)),
	}, PadOptions{PadValue: 9, Lengths: []string{"tok", "w"}})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := out.Get("tok")
	tv, _ := tok.Int32s()
	if !slices.Equal(tok.Shape, []int64{3, 3}) || !slices.Equal(tv, []int32{1, 9, 9, 2, 2, 2, 9, 9, 9}) {
		t.Fatalf("tok = %v %v", tok.Shape, tv)
	}
	m, _ := out.Get("m")
	mv, _ := m.Int32s()
	if !slices.Equal(m.Shape, []int64{3, 2, 2}) || !slices.Equal(mv, []int32{1, 2, 9, 9, 3, 9, 4, 9, 1, 2, 9, 9}) {
		t.Fatalf("m = %v %v", m.Shape, mv)
	}
	w, _ := out.Get("w")
	if err := w.Validate(); err != nil || !slices.Equal(w.Shape, []int64{3, 2}) || string(w.Entry(0)) != "a" || string(w.Entry(1)) != "" || string(w.Entry(3)) != "c" {
		t.Fatalf("w = %+v (%v)", w, err)
	}
	l, _ := out.Get("tok_length")
	lv, _ := l.Int32s()
	if !slices.Equal(lv, []int32{1, 3, 0}) {
		t.Fatalf("tok_length = %v", lv)
	}
	l, _ = out.Get("w_length")
	if lv, _ = l.Int32s(); !slices.Equal(lv, []int32{1, 2, 0}) {
		t.Fatalf("w_length = %v", lv)
	}
	if _, err := Pad([]tensor.Element{el(vec(t, "x", 1), vec(t, "x_length", 1))}, PadOptions{Lengths: []string{"x"}}); err == nil {
		t.Fatal("length tensor name collision accepted")
	}
}

func TestPadPattern(t *testing.T) {
	cases := []struct {
		dt   tensor.DType
		v    float64
		want []byte
	}{
		{tensor.Uint8, 300, []byte{255}},
		{tensor.Int8, -1.7, []byte{0xff}},
		{tensor.Bool, 2, []byte{1}},
		{tensor.Int32, -2, []byte{0xfe, 0xff, 0xff, 0xff}},
		{tensor.Float16, 1, []byte{0x00, 0x3c}},
		{tensor.BFloat16, 1, []byte{0x80, 0x3f}},
		{tensor.Float32, 1, []byte{0, 0, 0x80, 0x3f}},
		{tensor.Bytes, 1, nil},
	}
	for _, c := range cases {
		if got := PadPattern(c.dt, c.v); !slices.Equal(got, c.want) {
			t.Errorf("PadPattern(%s, %v) = %x, want %x", c.dt, c.v, got, c.want)
		}
	}
}

func FuzzPadNeverPanics(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		mk := func(n uint8) tensor.Element {
			n %= 8
			return el(tensor.Tensor{Name: "x", DType: tensor.Int32, Shape: []int64{int64(n)}, Data: data[:min(len(data), 4*int(n))]})
		}
		Pad([]tensor.Element{mk(a), mk(b)}, PadOptions{Lengths: []string{"x"}})
		Stack([]tensor.Element{mk(a), mk(b)})
	})
}
