package batch

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/fxamacker/cbor/v2"
)

// allDTypes returns an element with every dtype, scalars, empty tensors and
// odd sizes (so segments need padding).
func allDTypes(tb testing.TB) tensor.Element {
	tb.Helper()
	must := func(t tensor.Tensor, err error) tensor.Tensor {
		if err != nil {
			tb.Fatal(err)
		}
		return t
	}
	raw := func(name string, dt tensor.DType, shape []int64, n int) tensor.Tensor {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + int(dt))
		}
		return tensor.Tensor{Name: name, DType: dt, Shape: shape, Data: b}
	}
	return tensor.Element{Tensors: []tensor.Tensor{
		must(tensor.FromUint8s("u8", []int64{3}, []uint8{1, 2, 3})),
		raw("i8", tensor.Int8, []int64{5}, 5),
		must(tensor.FromInt32s("i32", []int64{2, 3}, []int32{1, -2, 3, -4, 5, math.MaxInt32})),
		must(tensor.FromInt64s("i64", []int64{2}, []int64{math.MinInt64, 42})),
		raw("f16", tensor.Float16, []int64{3}, 6),
		raw("bf16", tensor.BFloat16, []int64{1, 1}, 2),
		must(tensor.FromFloat32s("f32", []int64{3}, []float32{1.5, float32(math.Inf(-1)), -0})),
		must(tensor.FromFloat64s("f64", []int64{1}, []float64{math.Pi})),
		raw("bool", tensor.Bool, []int64{7}, 7),
		tensor.BytesVector("text", [][]byte{[]byte("hello"), nil, []byte("wörld"), []byte("x")}),
		tensor.BytesScalar("blob", []byte("a scalar blob of odd length")),
		tensor.BytesVector("no-strings", nil),
		tensor.ScalarInt64("scalar-i64", -7),
		tensor.ScalarBool("scalar-bool", true),
		{Name: "empty-f32", DType: tensor.Float32, Shape: []int64{0}},
		{Name: "empty-3d", DType: tensor.Int32, Shape: []int64{2, 0, 3}},
		must(tensor.FromFloat64s("last", []int64{2}, []float64{1, 2})),
	}}
}

func TestRoundTripAllDTypes(t *testing.T) {
	codec := testCodec(t)
	e := allDTypes(t)
	h := Header{Seq: 9, Worker: "node-3", Epoch: 2, Prov: []ProvRange{{1, 4, 0, 3}, {1, 4, 5, 6}, {2, 8, 0, 1}, {2, 15, 7, 9}}, Extra: cbor.RawMessage{0xa1, 0x01, 0x02}}
	f, err := Encode(codec, h, e)
	if err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	n, err := f.WriteTo(&wire)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(wire.Len()) || n < f.Size() || n > f.Size()+32 {
		t.Fatalf("WriteTo reported %d bytes, wrote %d, Size %d", n, wire.Len(), f.Size())
	}
	// The frame is immutable: a second write gives the same bytes.
	var again bytes.Buffer
	if _, err := f.WriteTo(&again); err != nil || !bytes.Equal(wire.Bytes(), again.Bytes()) {
		t.Fatalf("second WriteTo differs (err %v)", err)
	}

	for _, misalign := range []int{0, 3} {
		var buf []byte
		allocs := 0
		alloc := func(n int) []byte {
			allocs++
			buf = make([]byte, n+misalign)[misalign:]
			return buf
		}
		gh, ge, err := Decode(codec, bytes.NewReader(wire.Bytes()), DefaultLimits(), alloc)
		if err != nil {
			t.Fatalf("misalign %d: %v", misalign, err)
		}
		if allocs != 1 {
			t.Fatalf("alloc called %d times, want 1", allocs)
		}
		if what, ok := equalElements(e, ge); !ok {
			t.Fatalf("misalign %d: decoded element differs in %s", misalign, what)
		}
		if gh.Seq != h.Seq || gh.Worker != h.Worker || gh.Epoch != h.Epoch || !reflect.DeepEqual(gh.Prov, h.Prov) || !bytes.Equal(gh.Extra, h.Extra) {
			t.Fatalf("header %+v, want %+v", gh, h)
		}
		if len(gh.Tensors) != len(e.Tensors) || gh.Tensors[9].NumOffsets != 5 || gh.Tensors[2].DataBytes != 24 {
			t.Fatalf("tensor metadata %+v", gh.Tensors)
		}
		// Every tensor's data lives in the one tail buffer.
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		hi := lo + uintptr(len(buf))
		inBuf := func(p unsafe.Pointer, n int) bool {
			a := uintptr(p)
			return a >= lo && a+uintptr(n) <= hi
		}
		for _, tt := range ge.Tensors {
			if len(tt.Data) > 0 && !inBuf(unsafe.Pointer(&tt.Data[0]), len(tt.Data)) {
				t.Fatalf("tensor %q data is not a slice of the tail buffer", tt.Name)
			}
			if cap(tt.Data) != len(tt.Data) {
				t.Fatalf("tensor %q data has spare capacity %d: appends would clobber its neighbour", tt.Name, cap(tt.Data))
			}
			if misalign == 0 && len(tt.Offsets) > 0 && !inBuf(unsafe.Pointer(&tt.Offsets[0]), 8*len(tt.Offsets)) {
				t.Fatalf("tensor %q offsets copied out of an aligned tail buffer", tt.Name)
			}
			if len(tt.Data) > 0 && misalign == 0 && (uintptr(unsafe.Pointer(&tt.Data[0]))-lo)%segAlign != 0 {
				t.Fatalf("tensor %q data not aligned in the tail", tt.Name)
			}
			if err := tt.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	codec := testCodec(t)
	cases := map[string]tensor.Element{
		"invalid tensor":  {Tensors: []tensor.Tensor{{Name: "x", DType: tensor.Int32, Shape: []int64{2}, Data: []byte{1}}}},
		"bad dtype":       {Tensors: []tensor.Tensor{{Name: "x", DType: 99}}},
		"duplicate names": {Tensors: []tensor.Tensor{tensor.ScalarInt64("a", 1), tensor.ScalarInt64("a", 2)}},
		"bad utf8 name":   {Tensors: []tensor.Tensor{tensor.ScalarInt64("\xff", 1)}},
	}
	for name, e := range cases {
		if _, err := Encode(codec, Header{}, e); err == nil {
			t.Errorf("%s: Encode succeeded", name)
		}
	}
	small := codec.WithMaxFrame(1 << 16)
	big := tensor.Element{Tensors: []tensor.Tensor{{Name: "big", DType: tensor.Uint8, Shape: []int64{1 << 17}, Data: make([]byte, 1<<17)}}}
	if _, err := Encode(small, Header{}, big); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Errorf("oversized batch: %v, want ErrFrameTooLarge", err)
	}
	// Writing a frame does not reach a reader with a smaller bound.
	f, err := Encode(codec, Header{}, big)
	if err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	if _, err := f.WriteTo(&wire); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Decode(small, &wire, Limits{}, nil); !errors.Is(err, ErrMalformedBatch) {
		t.Errorf("frame over the reader's bound: %v, want ErrMalformedBatch", err)
	}
}

// rawFrame writes a frame with an arbitrary header and tail.
func rawFrame(tb testing.TB, codec *transport.Codec, m any, tail ...[]byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := codec.WriteFrame(&b, m, tail...); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func le64(vs ...int64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		for k := range 8 {
			b[8*i+k] = byte(uint64(v) >> (8 * k))
		}
	}
	return b
}

func batchMsg(ts ...TensorMeta) *wireMsg { return &wireMsg{Kind: kindBatch, Tensors: ts} }

// malformedCases are frames every decoder must reject with ErrMalformedBatch;
// also the fuzz seed corpus.
func malformedCases(tb testing.TB, codec *transport.Codec) map[string][]byte {
	f32 := func(shape ...int64) TensorMeta {
		n := int64(4)
		for _, d := range shape {
			n *= d
		}
		return TensorMeta{Name: "x", DType: tensor.Float32, Shape: shape, DataBytes: n}
	}
	strs := TensorMeta{Name: "s", DType: tensor.Bytes, Shape: []int64{2}, DataBytes: 3, NumOffsets: 3}
	pad := make([]byte, 5) // 3 data bytes + 5 padding = 8
	many := make([]TensorMeta, 300)
	for i := range many {
		many[i] = TensorMeta{Name: string(rune('A'+i%26)) + string(rune('a'+i/26)), DType: tensor.Uint8, Shape: []int64{0}}
	}
	full := rawFrame(tb, codec, batchMsg(f32(4)), make([]byte, 16))
	cases := compressedCases(tb, codec)
	for name, c := range provRejects() {
		if name != "prov too many" { // too large a header for the test codecs; see TestProvRejected
			cases[name] = rawFrame(tb, codec, &wireMsg{Kind: kindBatch, Prov: c.flat})
		}
	}
	for name, frame := range map[string][]byte{
		"tail shorter":       rawFrame(tb, codec, batchMsg(f32(4)), make([]byte, 12)),
		"tail longer":        rawFrame(tb, codec, batchMsg(f32(4)), make([]byte, 20)),
		"no tail":            rawFrame(tb, codec, batchMsg(f32(4))),
		"10 GiB data":        rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Uint8, Shape: []int64{10 << 30}, DataBytes: 10 << 30}), make([]byte, 64)),
		"bad dtype 0":        rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: 0}), make([]byte, 8)),
		"bad dtype 200":      rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: 200, DataBytes: 8}), make([]byte, 8)),
		"negative dim":       rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Uint8, Shape: []int64{-2, -4}, DataBytes: 8}), make([]byte, 8)),
		"negative bytes":     rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Bytes, Shape: []int64{}, DataBytes: -8, NumOffsets: 2}), make([]byte, 8)),
		"shape overflow":     rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Uint8, Shape: []int64{1 << 32, 1 << 32, 4}, DataBytes: 0}), make([]byte, 8)),
		"bytes overflow":     rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Float64, Shape: []int64{1 << 61}, DataBytes: 0}), make([]byte, 8)),
		"offsets overflow":   rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Bytes, Shape: []int64{math.MaxInt64 / 4}, NumOffsets: math.MaxInt64/4 + 1}), make([]byte, 8)),
		"max int64 values":   rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Bytes, Shape: []int64{math.MaxInt64}, NumOffsets: math.MaxInt64}), make([]byte, 8)),
		"too many tensors":   rawFrame(tb, codec, batchMsg(many...)),
		"too many dims":      rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Uint8, Shape: make([]int64, 40)})),
		"long name":          rawFrame(tb, codec, batchMsg(TensorMeta{Name: string(bytes.Repeat([]byte("n"), 300)), DType: tensor.Uint8})),
		"duplicate names":    rawFrame(tb, codec, batchMsg(TensorMeta{Name: "a", DType: tensor.Uint8, Shape: []int64{0}}, TensorMeta{Name: "a", DType: tensor.Uint8, Shape: []int64{0}})),
		"offsets count":      rawFrame(tb, codec, batchMsg(TensorMeta{Name: "s", DType: tensor.Bytes, Shape: []int64{2}, DataBytes: 3, NumOffsets: 2}), []byte("abc"), pad, le64(0, 3)),
		"offsets on float":   rawFrame(tb, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Float32, Shape: []int64{1}, DataBytes: 4, NumOffsets: 2}), make([]byte, 8), le64(0, 4)),
		"offsets decreasing": rawFrame(tb, codec, batchMsg(strs), []byte("abc"), pad, le64(0, 2, 1)),
		"offsets past data":  rawFrame(tb, codec, batchMsg(strs), []byte("abc"), pad, le64(0, 1, 9)),
		"offsets negative":   rawFrame(tb, codec, batchMsg(strs), []byte("abc"), pad, le64(0, -1, 3)),
		"offsets start":      rawFrame(tb, codec, batchMsg(strs), []byte("abc"), pad, le64(1, 2, 3)),
		"offsets end early":  rawFrame(tb, codec, batchMsg(strs), []byte("abc"), pad, le64(0, 1, 2)),
		"offsets unpadded":   rawFrame(tb, codec, batchMsg(strs), []byte("abc"), le64(0, 1, 3)),
		"nonzero padding":    rawFrame(tb, codec, batchMsg(strs), []byte("abc"), []byte{0, 0, 1, 0, 0}, le64(0, 1, 3)),
		"credit not batch":   rawFrame(tb, codec, &wireMsg{Kind: kindCredit, Credits: 1}),
		"unpadded no values": rawFrame(tb, codec, batchMsg(TensorMeta{Name: "tokens", DType: tensor.Int32, Shape: []int64{1, 4, 0}, Lengths: "tokens_length", PadBits: make([]byte, 4)}, TensorMeta{Name: "tokens_length", DType: tensor.Int32, Shape: []int64{1}, DataBytes: 4}), make([]byte, 4)),
		"unknown kind":       rawFrame(tb, codec, &wireMsg{Kind: 77}),
		"end with tail":      rawFrame(tb, codec, &wireMsg{Kind: kindEnd}, []byte("x")),
		"header not a map":   rawFrame(tb, codec, []int{1, 2, 3}),
		"truncated":          full[:len(full)-3],
		"garbage":            []byte("this is not a frame at all, just some text"),
	} {
		cases[name] = frame
	}
	return cases
}

func TestDecodeRejectsMalformed(t *testing.T) {
	codec := testCodec(t)
	compressed := compressedCases(t, codec)
	for name, frame := range malformedCases(t, codec) {
		t.Run(name, func(t *testing.T) {
			maxAlloc := 0
			alloc := func(n int) []byte {
				maxAlloc = max(maxAlloc, n)
				return make([]byte, n)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := Decode(codec, bytes.NewReader(frame), DefaultLimits(), alloc)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrMalformedBatch) {
				t.Fatalf("got %v, want ErrMalformedBatch", err)
			}
			t.Log(err)
			limit := len(frame)
			if _, ok := compressed[name]; ok {
				limit = 1 << 10 // the decompressed tail, as its (small) header says
			}
			if maxAlloc > limit {
				t.Fatalf("allocated a %d-byte tail for a %d-byte frame", maxAlloc, len(frame))
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Fatalf("decoding a %d-byte frame allocated %d bytes", len(frame), grew)
			}
		})
	}
}

func TestDecodeValidEdgeCases(t *testing.T) {
	codec := testCodec(t)
	// An element without tensors, and one with only empty tensors: no tail.
	for _, e := range []tensor.Element{{}, {Tensors: []tensor.Tensor{{Name: "e", DType: tensor.Int64, Shape: []int64{0, 5}}}}} {
		f, err := Encode(codec, Header{Seq: 1}, e)
		if err != nil {
			t.Fatal(err)
		}
		var wire bytes.Buffer
		if _, err := f.WriteTo(&wire); err != nil {
			t.Fatal(err)
		}
		called := false
		h, ge, err := Decode(codec, &wire, Limits{}, func(n int) []byte { called = true; return make([]byte, n) })
		if err != nil {
			t.Fatal(err)
		}
		if called {
			t.Fatal("alloc called for an empty tail")
		}
		if what, ok := equalElements(e, ge); !ok || h.Seq != 1 {
			t.Fatalf("differs in %s (seq %d)", what, h.Seq)
		}
	}
	// A clean end of stream is io.EOF, unwrapped.
	if _, _, err := Decode(codec, bytes.NewReader(nil), Limits{}, nil); err != io.EOF {
		t.Fatalf("empty reader: %v, want io.EOF", err)
	}
	// Tighter limits reject what the defaults accept.
	f, err := Encode(codec, Header{Prov: []ProvRange{{0, 1, 0, 4}, {0, 2, 0, 4}, {0, 3, 0, 4}}}, allDTypes(t))
	if err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	if _, err := f.WriteTo(&wire); err != nil {
		t.Fatal(err)
	}
	for _, lim := range []Limits{{MaxTensors: 3}, {MaxDims: 1}, {MaxNameBytes: 3}, {MaxProvRanges: 2}} {
		if _, _, err := Decode(codec, bytes.NewReader(wire.Bytes()), lim, nil); !errors.Is(err, ErrMalformedBatch) {
			t.Errorf("limits %+v: %v, want ErrMalformedBatch", lim, err)
		}
	}
}
