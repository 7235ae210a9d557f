package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// paddedBatch builds tokens int32 [len(lengths), maxLen] padded with pad,
// its "tokens_length" companion, and an unrelated tensor.
func paddedBatch(lengths []int32, maxLen int, pad int32) tensor.Element {
	b := len(lengths)
	tok := make([]byte, 4*b*maxLen)
	ln := make([]byte, 4*b)
	for r, n := range lengths {
		binary.LittleEndian.PutUint32(ln[4*r:], uint32(n))
		for c := 0; c < maxLen; c++ {
			v := pad
			if c < int(n) {
				v = int32(1000*r + c + 1)
			}
			binary.LittleEndian.PutUint32(tok[4*(r*maxLen+c):], uint32(v))
		}
	}
	return tensor.Element{Tensors: []tensor.Tensor{
		{Name: "tokens", DType: tensor.Int32, Shape: []int64{int64(b), int64(maxLen)}, Data: tok},
		{Name: "id", DType: tensor.Int64, Shape: []int64{int64(b)}, Data: make([]byte, 8*b)},
		{Name: "tokens_length", DType: tensor.Int32, Shape: []int64{int64(b)}, Data: ln},
	}}
}

func encodeDecode(t *testing.T, e tensor.Element, o EncodeOptions) (tensor.Element, int64) {
	t.Helper()
	codec := testCodec(t)
	f, err := EncodeWith(codec, Header{}, e, o)
	if err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	n, err := f.WriteTo(&wire)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := Decode(codec, &wire, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got, n
}

func TestUnpaddedRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lengths []int32
		pad     int32
		smaller bool
	}{
		{"heavy tail", []int32{3, 200, 0, 7, 1, 2}, 0, true},
		{"nonzero pad", []int32{5, 1, 9}, -1, true},
		{"all full", []int32{8, 8}, 0, false},
		{"all empty", []int32{0, 0, 0}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxLen := 0
			for _, n := range tc.lengths {
				maxLen = max(maxLen, int(n))
			}
			maxLen = max(maxLen, 8)
			e := paddedBatch(tc.lengths, maxLen, tc.pad)
			dense, nDense := encodeDecode(t, e, EncodeOptions{})
			got, nUnpadded := encodeDecode(t, e, EncodeOptions{Unpadded: true})
			narrow, nNarrow := encodeDecode(t, e, EncodeOptions{Unpadded: true, Narrow: true})
			for _, d := range []tensor.Element{dense, got, narrow} {
				if where, ok := equalElements(e, d); !ok {
					t.Fatalf("decoded batch differs in %s", where)
				}
			}
			if tc.smaller && nUnpadded >= nDense {
				t.Errorf("unpadded frame is %d bytes, dense %d: want smaller", nUnpadded, nDense)
			}
			if tc.name != "all empty" && tc.smaller && nNarrow >= nUnpadded {
				t.Errorf("narrowed frame is %d bytes, unpadded %d: want smaller", nNarrow, nUnpadded)
			}
			t.Logf("dense %d bytes, unpadded %d bytes, narrowed %d", nDense, nUnpadded, nNarrow)
		})
	}
}

// Narrow picks the narrowest width that holds every valid value (padding
// does not count), falls back to full width for negative or large values,
// and the receiver widens them back exactly.
func TestNarrowWidths(t *testing.T) {
	codec := testCodec(t)
	for _, tc := range []struct {
		name  string
		dtype tensor.DType
		vals  []int64
		want  uint8
	}{
		{"int32 bytes", tensor.Int32, []int64{0, 1, 255, 7}, 1},
		{"int32 tokens", tensor.Int32, []int64{0, 256, 31999, 65535}, 2},
		{"int32 large", tensor.Int32, []int64{1, 65536}, 0},
		{"int32 negative", tensor.Int32, []int64{5, -1}, 0},
		{"int64 bytes", tensor.Int64, []int64{3, 200}, 1},
		{"int64 tokens", tensor.Int64, []int64{3, 60000}, 2},
		{"int64 ids", tensor.Int64, []int64{1 << 31, 1<<32 - 1}, 4},
		{"int64 large", tensor.Int64, []int64{1 << 32}, 0},
		{"int64 negative", tensor.Int64, []int64{-5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.dtype.Size()
			const rows, width = 3, 8
			tok := make([]byte, rows*width*size)
			ln := make([]byte, 4*rows)
			for r := range rows {
				n := max(len(tc.vals)-r, 1) // rows of different lengths, one value at least
				binary.LittleEndian.PutUint32(ln[4*r:], uint32(n))
				for c := range n {
					v := uint64(tc.vals[(c+r)%len(tc.vals)])
					for b := range size {
						tok[(r*width+c)*size+b] = byte(v >> (8 * b))
					}
				}
				for c := n; c < width; c++ { // padding the narrow width could not hold
					for b := range size {
						tok[(r*width+c)*size+b] = 0xEE
					}
				}
			}
			e := tensor.Element{Tensors: []tensor.Tensor{
				{Name: "tokens", DType: tc.dtype, Shape: []int64{rows, width}, Data: tok},
				{Name: "tokens_length", DType: tensor.Int32, Shape: []int64{rows}, Data: ln},
			}}
			f, err := EncodeWith(codec, Header{}, e, EncodeOptions{Unpadded: true, Narrow: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.m.Tensors[0].Narrow; got != tc.want || f.m.Tensors[0].Lengths == "" {
				t.Fatalf("sent %d bytes a value (unpadded: %v), want %d", got, f.m.Tensors[0].Lengths != "", tc.want)
			}
			var wire bytes.Buffer
			if _, err := f.WriteTo(&wire); err != nil {
				t.Fatal(err)
			}
			_, got, err := Decode(codec, &wire, Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if where, ok := equalElements(e, got); !ok {
				t.Fatalf("decoded batch differs in %s", where)
			}
		})
	}
}

// Padding that is not one uniform value would be lost: such a tensor is
// sent as it is.
func TestUnpaddedFallsBackWhenLossy(t *testing.T) {
	e := paddedBatch([]int32{2, 4}, 4, 0)
	binary.LittleEndian.PutUint32(e.Tensors[0].Data[4*3:], 77) // row 0, past its length
	got, _ := encodeDecode(t, e, EncodeOptions{Unpadded: true})
	if where, ok := equalElements(e, got); !ok {
		t.Fatalf("decoded batch differs in %s", where)
	}
}

func TestUnpaddedMalformed(t *testing.T) {
	codec := testCodec(t)
	i32 := func(vs ...int32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
		return b
	}
	tok := func(dataBytes int64, shape ...int64) TensorMeta {
		return TensorMeta{Name: "tokens", DType: tensor.Int32, Shape: shape, DataBytes: dataBytes, Lengths: "tokens_length", PadBits: make([]byte, 4)}
	}
	lens := TensorMeta{Name: "tokens_length", DType: tensor.Int32, Shape: []int64{2}, DataBytes: 8}
	narrowTok := func(narrow uint8, dataBytes int64, shape ...int64) TensorMeta {
		m := tok(dataBytes, shape...)
		m.Narrow = narrow
		return m
	}
	cases := map[string][]byte{
		"no lengths tensor":    rawFrame(t, codec, batchMsg(tok(8, 2, 4)), i32(1, 2)),
		"length over max":      rawFrame(t, codec, batchMsg(tok(8, 2, 4), lens), i32(1, 2), i32(1, 5)),
		"negative length":      rawFrame(t, codec, batchMsg(tok(8, 2, 4), lens), i32(1, 2), i32(3, -1)),
		"lengths miscount":     rawFrame(t, codec, batchMsg(tok(8, 2, 4), lens), i32(1, 2), i32(1, 2)),
		"pad bits wrong size":  rawFrame(t, codec, batchMsg(TensorMeta{Name: "tokens", DType: tensor.Int32, Shape: []int64{2, 4}, DataBytes: 8, Lengths: "tokens_length", PadBits: []byte{0}}, lens), i32(1, 2), i32(1, 1)),
		"rank 1":               rawFrame(t, codec, batchMsg(tok(8, 2), lens), i32(1, 2), i32(1, 1)),
		"pads to 10 TiB":       rawFrame(t, codec, batchMsg(tok(8, 2, 1<<40), lens), i32(1, 2), i32(1, 1)),
		"more sent than fits":  rawFrame(t, codec, batchMsg(tok(40, 2, 4), lens), make([]byte, 40), i32(1, 1)),
		"narrow dense tensor":  rawFrame(t, codec, batchMsg(TensorMeta{Name: "x", DType: tensor.Int32, Shape: []int64{2}, DataBytes: 8, Narrow: 2}), i32(1, 2)),
		"narrow 3 bytes":       rawFrame(t, codec, batchMsg(narrowTok(3, 6, 2, 4), lens), make([]byte, 8), i32(1, 1)),
		"narrow 4 of int32":    rawFrame(t, codec, batchMsg(narrowTok(4, 8, 2, 4), lens), i32(1, 2), i32(1, 1)),
		"narrow float32":       rawFrame(t, codec, batchMsg(TensorMeta{Name: "tokens", DType: tensor.Float32, Shape: []int64{2, 4}, DataBytes: 4, Lengths: "tokens_length", PadBits: make([]byte, 4), Narrow: 2}, lens), make([]byte, 8), i32(1, 1)),
		"narrow miscount":      rawFrame(t, codec, batchMsg(narrowTok(2, 8, 2, 4), lens), i32(1, 2), i32(1, 1)),
		"narrow too much sent": rawFrame(t, codec, batchMsg(narrowTok(2, 24, 2, 4), lens), make([]byte, 24), i32(4, 4)),
		"bytes dtype unpadded": rawFrame(t, codec, batchMsg(TensorMeta{Name: "tokens", DType: tensor.Bytes, Shape: []int64{2, 4}, NumOffsets: 9, Lengths: "tokens_length", PadBits: []byte{0}}, lens), le64(0, 0, 0, 0, 0, 0, 0, 0, 0), i32(0, 0)),
	}
	for name, wire := range cases {
		if _, _, err := Decode(codec, bytes.NewReader(wire), Limits{}, nil); !errors.Is(err, ErrMalformedBatch) {
			t.Errorf("%s: err = %v, want ErrMalformedBatch", name, err)
		}
	}
}

// BenchmarkUnpaddedVsDense: a bucket of heavy-tailed sentences (one long
// row, most short), the case the bucketed text pipeline produces.
func BenchmarkUnpaddedVsDense(b *testing.B) {
	lengths := make([]int32, 64)
	for i := range lengths {
		lengths[i] = int32(8 + i%16)
	}
	lengths[0] = 512
	e := paddedBatch(lengths, 512, 0)
	codec := testCodec(b)
	for _, o := range []EncodeOptions{{}, {Unpadded: true}} {
		name := "dense"
		if o.Unpadded {
			name = "unpadded"
		}
		b.Run(name, func(b *testing.B) {
			var wire bytes.Buffer
			var n int64
			for b.Loop() {
				f, err := EncodeWith(codec, Header{}, e, o)
				if err != nil {
					b.Fatal(err)
				}
				wire.Reset()
				n, _ = f.WriteTo(&wire)
				if _, _, err := Decode(codec, &wire, Limits{}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "wire-bytes/batch")
		})
	}
}

// Re-padding into recycled buffers (Alloc returning old, dirty bytes) gives
// the same batch as into new ones: the padding is written, not assumed.
func TestUnpaddedIntoDirtyBuffers(t *testing.T) {
	codec := testCodec(t)
	for _, pad := range []int32{0, -1, 1} { // 1: narrowed (pad -1 is a negative value, not padding)
		e := paddedBatch([]int32{3, 40, 0, 7}, 40, pad)
		f, err := EncodeWith(codec, Header{}, e, EncodeOptions{Unpadded: true, Narrow: pad == 1})
		if err != nil {
			t.Fatal(err)
		}
		var wire bytes.Buffer
		if _, err := f.WriteTo(&wire); err != nil {
			t.Fatal(err)
		}
		var allocs int
		dirty := func(n int) []byte {
			allocs++
			b := make([]byte, n)
			for i := range b {
				b[i] = 0xAB
			}
			return b
		}
		_, got, err := Decode(codec, &wire, Limits{}, dirty)
		if err != nil {
			t.Fatal(err)
		}
		if where, ok := equalElements(e, got); !ok {
			t.Fatalf("pad %d: batch re-padded into dirty buffers differs in %s", pad, where)
		}
		if allocs != 2 {
			t.Fatalf("pad %d: Alloc called %d times, want 2 (the tail, the re-padded tokens)", pad, allocs)
		}
	}
}

// The receiver reuses one tail buffer for batches with unpadded tensors:
// a batch Next returned must not change when later batches arrive.
func TestUnpaddedBatchesSurviveLaterOnes(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 4}, 4, Limits{})
	ctx := testutil.Ctx(t, 10*time.Second)
	var sent []tensor.Element
	for i := range 6 {
		// Tails shrink batch by batch, so each fits in the buffer the
		// previous one used.
		lengths := []int32{int32(9 - i), int32(20 - 3*i), 0, int32(12 - i)}
		e := paddedBatch(lengths, 32, 0)
		binary.LittleEndian.PutUint64(e.Tensors[1].Data, uint64(1000+i)) // distinct ids
		sent = append(sent, e)
	}
	got := sendAll(t, ctx, p.worker.Codec, snd, rcv, sent, EncodeOptions{Unpadded: true})
	if !rcv.tailUsed && rcv.scratch == nil {
		t.Fatal("the reused tail buffer was not used: the test tests nothing")
	}
	for i := range sent {
		if where, ok := equalElements(sent[i], got[i]); !ok {
			t.Fatalf("batch %d changed after later batches arrived: differs in %s", i, where)
		}
	}
}

// BenchmarkWiden: widening a text batch's narrowed token ids (2 → 4 bytes).
func BenchmarkWiden(b *testing.B) {
	const k = 2200
	src := make([]byte, 2*k)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 4*k)
	b.SetBytes(4 * k)
	for b.Loop() {
		widen(dst, src, 2, 4)
	}
}

func TestWidenMatchesGeneric(t *testing.T) {
	for k := range 40 { // every mix of the 8-, 4- and 1-value loops
		src := make([]byte, 2*k+6) // longer than the k values dst takes
		for i := range src {
			src[i] = byte(i*37 + 1)
		}
		buf := bytes.Repeat([]byte{0xEE}, 4*k+8)
		dst := buf[:4*k]
		widen(dst, src, 2, 4)
		for j := range k {
			if got, want := binary.LittleEndian.Uint32(dst[4*j:]), uint32(binary.LittleEndian.Uint16(src[2*j:])); got != want {
				t.Fatalf("k=%d value %d: %d, want %d", k, j, got, want)
			}
		}
		for i, b := range buf[4*k:] {
			if b != 0xEE {
				t.Fatalf("k=%d: widen wrote byte %d past dst", k, 4*k+i)
			}
		}
	}
}

// sendAll encodes sent with o and sends it on snd (then End) from another
// goroutine, and returns the batches rcv received, all held at once, once
// the sender is done: the last batch can arrive before its Send returns,
// and the test's cleanup must not close the Sender under it.
func sendAll(t *testing.T, ctx context.Context, codec *transport.Codec, snd *Sender, rcv *Receiver, sent []tensor.Element, o EncodeOptions) []tensor.Element {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for i, e := range sent {
			f, err := EncodeWith(codec, Header{Seq: uint64(i)}, e, o)
			if err == nil {
				err = snd.Send(ctx, f)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- snd.End(nil)
	}()
	var got []tensor.Element
	for range sent {
		_, e, err := rcv.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

// A batch whose tail is too large for the reused tail buffer (a big dense
// tensor beside the unpadded tokens) must not get its re-padded tokens put
// in that buffer, where the next batch would overwrite them. Plain and
// compressed: a compressed tail is decompressed into a buffer of its own
// the same way.
func TestUnpaddedBesideLargeTensorSurvivesLaterOnes(t *testing.T) {
	for _, tc := range []struct {
		comp   Compression
		pooled bool // buffers from a BufferPool, as a client that recycles
	}{{CompressNone, false}, {CompressLZ4, false}, {CompressNone, true}} {
		comp := tc.comp
		t.Run(fmt.Sprintf("%v pooled=%v", comp, tc.pooled), func(t *testing.T) {
			p := newPair(t, transport.FastConfig())
			var cfg ReceiverConfig
			if tc.pooled {
				cfg.Alloc = NewBufferPool(64 << 20).Recorder().Alloc
			}
			snd, rcv := p.streamWith(t, OpenRequest{Job: "j", Window: 4, Compression: comp}, 4, cfg, nil)
			ctx := testutil.Ctx(t, 10*time.Second)
			var sent []tensor.Element
			for i := range 3 {
				e := paddedBatch([]int32{int32(5 + i), 17, 0, int32(9 - i)}, 24, 0)
				binary.LittleEndian.PutUint64(e.Tensors[1].Data, uint64(1000+i))
				big := make([]byte, maxScratchBytes+4096)
				for j := range big {
					big[j] = byte(j*31 + i) // distinct per batch
				}
				e.Tensors = append(e.Tensors, tensor.Tensor{Name: "image", DType: tensor.Uint8, Shape: []int64{int64(len(big))}, Data: big})
				sent = append(sent, e)
			}
			got := sendAll(t, ctx, p.worker.Codec, snd, rcv, sent, EncodeOptions{Unpadded: true, Narrow: true})
			for i := range sent {
				if where, ok := equalElements(sent[i], got[i]); !ok {
					t.Fatalf("batch %d changed after later batches arrived: differs in %s", i, where)
				}
			}
		})
	}
}
