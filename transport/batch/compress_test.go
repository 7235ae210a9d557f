package batch

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// tokenBatch is a padded text batch whose tokens come from a small,
// skewed vocabulary: compressible as real token batches are.
func tokenBatch(rows, maxLen int) tensor.Element {
	lengths := make([]int32, rows)
	for r := range lengths {
		lengths[r] = int32(maxLen/2 + (r*7)%(maxLen/2))
	}
	e := paddedBatch(lengths, maxLen, 0)
	vocab := []uint32{3, 17, 17, 42, 42, 42, 512, 1999, 31000}
	tok := e.Tensors[0].Data
	for r, n := range lengths {
		for c := range int(n) {
			binary.LittleEndian.PutUint32(tok[4*(r*maxLen+c):], vocab[(r*c+3*c+r)%len(vocab)])
		}
	}
	return e
}

var compressions = []Compression{CompressLZ4, CompressZstd}

func TestParseCompression(t *testing.T) {
	for i, name := range Compressions {
		c, err := ParseCompression(strings.ToUpper(name))
		if err != nil || c != Compression(i) || c.String() != name || !c.Valid() {
			t.Fatalf("ParseCompression(%q) = %v, %v", name, c, err)
		}
	}
	if c, err := ParseCompression(""); err != nil || c != CompressNone {
		t.Fatalf(`ParseCompression("") = %v, %v`, c, err)
	}
	_, err := ParseCompression("snappy")
	if err == nil || !strings.Contains(err.Error(), "lz4") {
		t.Fatalf("ParseCompression(snappy): %v, want an error naming the choices", err)
	}
	if Compression(9).Valid() {
		t.Fatal("compression 9 valid")
	}
}

// A compressed frame is smaller, decodes to the same batch (padded or
// unpadded, every dtype), and is built once per compression.
func TestCompressedRoundTrip(t *testing.T) {
	codec := testCodec(t)
	elems := map[string]tensor.Element{"tokens": tokenBatch(64, 128), "all dtypes": allDTypes(t)}
	for name, e := range elems {
		for _, unpadded := range []bool{false, true} {
			for _, c := range compressions {
				f, err := EncodeWith(codec, Header{Seq: 7, Worker: "w", Prov: []ProvRange{{0, 3, 10, 20}}}, e, EncodeOptions{Unpadded: unpadded})
				if err != nil {
					t.Fatal(err)
				}
				z, err := f.Compressed(c)
				if err != nil {
					t.Fatal(err)
				}
				if z2, _ := f.Compressed(c); z2 != z {
					t.Fatalf("%s/%v: Compressed built the frame twice", name, c)
				}
				if name == "tokens" && (z == f || z.Size() >= f.Size()) {
					t.Fatalf("%s/%v: compressed %d bytes, uncompressed %d", name, c, z.Size(), f.Size())
				}
				if zz, _ := z.Compressed(CompressZstd); zz != z {
					t.Fatal("compressing a compressed frame again")
				}
				var wire bytes.Buffer
				if _, err := z.WriteTo(&wire); err != nil {
					t.Fatal(err)
				}
				h, got, err := Decode(codec, &wire, DefaultLimits(), nil)
				if err != nil {
					t.Fatalf("%s/%v/unpadded=%v: %v", name, c, unpadded, err)
				}
				if what, ok := equalElements(e, got); !ok || h.Seq != 7 || h.Worker != "w" || len(h.Prov) != 1 || h.Prov[0] != (ProvRange{0, 3, 10, 20}) {
					t.Fatalf("%s/%v/unpadded=%v: decoded batch differs (%s, %+v)", name, c, unpadded, what, h)
				}
			}
		}
	}
}

// Bytes that compression cannot shrink are sent as they are.
func TestIncompressibleSentAsIs(t *testing.T) {
	codec := testCodec(t)
	data := make([]byte, 64<<10)
	rand.Read(data)
	f, err := Encode(codec, Header{}, tensor.Element{Tensors: []tensor.Tensor{{Name: "x", DType: tensor.Uint8, Shape: []int64{int64(len(data))}, Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(compressions, CompressNone) {
		if z, err := f.Compressed(c); err != nil || z != f {
			t.Fatalf("%v: got a new frame (%v), want the frame itself", c, err)
		}
	}
	if _, err := f.Compressed(Compression(7)); err == nil {
		t.Fatal("unknown compression accepted")
	}
}

// compressedCases are malformed compressed frames (part of malformedCases).
func compressedCases(tb testing.TB, codec *transport.Codec) map[string][]byte {
	meta := TensorMeta{Name: "x", DType: tensor.Uint8, Shape: []int64{64}, DataBytes: 64}
	raw := bytes.Repeat([]byte("abcdefgh"), 8)
	zs, err := zstd.NewWriter(nil)
	if err != nil {
		tb.Fatal(err)
	}
	z := zs.EncodeAll(raw, nil)
	lz := make([]byte, lz4.CompressBlockBound(len(raw)))
	n, err := lz4.CompressBlock(raw, lz, nil)
	if err != nil || n == 0 {
		tb.Fatalf("lz4: %d, %v", n, err)
	}
	lz = lz[:n]
	msg := func(c Compression, rawTail int64, shape int64) *wireMsg {
		m := meta
		m.Shape, m.DataBytes = []int64{shape}, shape
		return &wireMsg{Kind: kindBatch, Tensors: []TensorMeta{m}, Comp: c, RawTail: rawTail}
	}
	return map[string][]byte{
		"lz4 garbage":           rawFrame(tb, codec, msg(CompressLZ4, 64, 64), []byte("not an lz4 block at all")),
		"zstd garbage":          rawFrame(tb, codec, msg(CompressZstd, 64, 64), []byte("not a zstd frame at all")),
		"lz4 shorter than said": rawFrame(tb, codec, msg(CompressLZ4, 72, 72), lz),
		"zstd shorter":          rawFrame(tb, codec, msg(CompressZstd, 72, 72), z),
		"zstd longer":           rawFrame(tb, codec, msg(CompressZstd, 56, 56), z),
		"lz4 longer":            rawFrame(tb, codec, msg(CompressLZ4, 56, 56), lz),
		"zstd two frames":       rawFrame(tb, codec, msg(CompressZstd, 64, 64), z, z),
		"raw tail huge":         rawFrame(tb, codec, msg(CompressLZ4, 1<<62, 64), lz),
		"raw tail vs meta":      rawFrame(tb, codec, msg(CompressLZ4, 64, 32), lz),
		"unknown compression":   rawFrame(tb, codec, msg(9, 64, 64), lz),
		"raw tail uncompressed": rawFrame(tb, codec, msg(CompressNone, 64, 64), raw),
		"compressed no tail":    rawFrame(tb, codec, msg(CompressLZ4, 64, 64)),
	}
}

// The valid frames compressedCases is made from decode.
func TestCompressedCasesValidBase(t *testing.T) {
	compressedRoundTrip(t, bytes.Repeat([]byte("abcdefgh"), 8))
}

// compressedRoundTrip sends data as one uint8 tensor compressed with each
// compression (which must shrink it) and checks each decodes back to data.
func compressedRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	codec := testCodec(t)
	e := tensor.Element{Tensors: []tensor.Tensor{{Name: "x", DType: tensor.Uint8, Shape: []int64{int64(len(data))}, Data: data}}}
	f, err := Encode(codec, Header{}, e)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range compressions {
		z, err := f.Compressed(c)
		if err != nil || z == f {
			t.Fatalf("%v: %v (compressed: %v)", c, err, z != f)
		}
		var wire bytes.Buffer
		z.WriteTo(&wire)
		if _, got, err := Decode(codec, &wire, DefaultLimits(), nil); err != nil || !bytes.Equal(got.Tensors[0].Data, data) {
			t.Fatalf("%v: %v", c, err)
		}
	}
}

// Through a real stream: the client asks for a compression, the worker
// confirms it and compresses, the batches arrive intact and fewer bytes
// cross the stream. A frame shared by streams is compressed once.
func TestStreamCompressed(t *testing.T) {
	const n = 20
	sent := map[Compression]int64{}
	for _, c := range append([]Compression{CompressNone}, compressions...) {
		p := newPair(t, transport.FastConfig())
		ctx := testutil.Ctx(t, 10*time.Second)
		var cc *countingConn
		snd, rcv := p.streamWith(t, OpenRequest{Job: "j", Window: 4, Compression: c}, 16, ReceiverConfig{},
			func(conn net.Conn) net.Conn { cc = &countingConn{Conn: conn}; return cc })
		fs := make([]*Frame, n)
		want := make([]tensor.Element, n)
		for i := range fs {
			want[i] = tokenBatch(32+i, 96)
			fs[i] = encode(t, p.worker.Codec, i, want[i])
		}
		done := sendAllThenEnd(ctx, snd, fs)
		for i := range n {
			h, e, err := rcv.Next(ctx)
			if err != nil {
				t.Fatalf("%v: batch %d: %v", c, i, err)
			}
			if what, ok := equalElements(want[i], e); !ok || h.Seq != uint64(i) {
				t.Fatalf("%v: batch %d differs (%s)", c, i, what)
			}
		}
		if _, _, err := rcv.Next(ctx); err != io.EOF {
			t.Fatalf("%v: after the last batch: %v, want io.EOF", c, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := rcv.Compression(); got != c {
			t.Fatalf("worker confirmed %v, asked for %v", got, c)
		}
		sent[c] = cc.bytes.Load()
		if c != CompressNone {
			for i, f := range fs {
				if z, _ := f.Compressed(c); z == f {
					t.Fatalf("%v: frame %d was not compressed", c, i)
				}
			}
		}
	}
	t.Logf("bytes on the stream: %v", sent)
	for _, c := range compressions {
		if sent[c] >= sent[CompressNone] {
			t.Fatalf("%v: %d bytes on the stream, uncompressed %d", c, sent[c], sent[CompressNone])
		}
	}
}

// A client asking for a compression the worker does not know (a newer
// client's) is served uncompressed, which the worker's Accept says; a
// Receiver refuses to ask for one it does not know itself.
func TestOpenUnknownCompression(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 5*time.Second)
	if _, err := OpenConfig(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Job: "j", Window: 1, Compression: 9}, ReceiverConfig{}); err == nil {
		t.Fatal("Open accepted an unknown compression")
	}
	s, snd := p.rawClient(t, wireMsg{Kind: kindOpen, Version: ProtocolVersion, Job: "j", Window: 1, Comp: 9}, 4)
	var m wireMsg
	if _, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{}); err != nil || m.Kind != kindAccept || m.Comp != CompressNone {
		t.Fatalf("client got %+v, %v; want an Accept confirming no compression", m, err)
	}
	e := tokenBatch(16, 64)
	go snd.Send(ctx, encode(t, p.worker.Codec, 0, e))
	m = wireMsg{}
	got, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{})
	if err != nil || m.Kind != kindBatch || m.Comp != CompressNone {
		t.Fatalf("client got %+v, %v; want an uncompressed batch", m, err)
	}
	if what, ok := equalElements(e, got); !ok {
		t.Fatalf("batch differs (%s)", what)
	}
}

// Every client of the current protocol version re-pads and widens: a
// frame encoded unpadded and narrowed goes on the stream as encoded, and
// decodes to the padded batch.
func TestNarrowedFramesSentAsEncoded(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 5*time.Second)
	s, snd := p.rawClient(t, wireMsg{Kind: kindOpen, Version: ProtocolVersion, Job: "j", Window: 2}, 4)
	var m wireMsg
	if _, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{}); err != nil || m.Kind != kindAccept {
		t.Fatalf("accept: %+v, %v", m, err)
	}
	e := tokenBatch(16, 64)
	f, err := EncodeWith(p.worker.Codec, Header{Seq: 5}, e, ShippedEncodeOptions)
	if err != nil || f.m.Tensors[0].Narrow != 2 {
		t.Fatalf("encode: %v (tokens narrowed to %d bytes)", err, f.m.Tensors[0].Narrow)
	}
	go snd.Send(ctx, f)
	m = wireMsg{}
	got, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{})
	if err != nil || m.Kind != kindBatch || m.Seq != 5 {
		t.Fatalf("%+v, %v", m, err)
	}
	if m.Tensors[0].Lengths == "" || m.Tensors[0].Narrow != 2 {
		t.Fatalf("tokens sent unpadded=%v narrow=%d, want unpadded, narrowed to 2 bytes", m.Tensors[0].Lengths != "", m.Tensors[0].Narrow)
	}
	if what, ok := equalElements(e, got); !ok {
		t.Fatalf("batch differs (%s)", what)
	}
}

// A zstd tail that decodes to more than its RawTail never writes past the
// RawTail bytes of the buffer alloc gave, whatever that buffer's capacity
// (an alloc may hand out slices of a shared arena).
func TestZstdStaysWithinRawTail(t *testing.T) {
	codec := testCodec(t)
	raw := bytes.Repeat([]byte("abcdefgh"), 16) // 128 bytes
	zs, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	meta := TensorMeta{Name: "x", DType: tensor.Uint8, Shape: []int64{64}, DataBytes: 64}
	frame := rawFrame(t, codec, &wireMsg{Kind: kindBatch, Tensors: []TensorMeta{meta}, Comp: CompressZstd, RawTail: 64}, zs.EncodeAll(raw, nil))
	arena := make([]byte, 4096)
	for i := range arena {
		arena[i] = 0x5A
	}
	_, _, err = Decode(codec, bytes.NewReader(frame), DefaultLimits(), func(n int) []byte { return arena[:n] })
	if !errors.Is(err, ErrMalformedBatch) {
		t.Fatalf("got %v, want ErrMalformedBatch", err)
	}
	for i, b := range arena[64:] {
		if b != 0x5A {
			t.Fatalf("arena byte %d overwritten", 64+i)
		}
	}
}

// Narrowing with inner dims (rank 3), int32 and int64, every compression
// (from a review).
func TestNarrowRank3(t *testing.T) {
	codec := testCodec(t)
	for _, dt := range []tensor.DType{tensor.Int32, tensor.Int64} {
		size := dt.Size()
		const b, l, d = 3, 5, 3
		data := make([]byte, b*l*d*size)
		lens := []int32{2, 5, 0}
		for r := 0; r < b; r++ {
			for c := 0; c < int(lens[r]); c++ {
				for k := 0; k < d; k++ {
					v := uint64(r*1000 + c*10 + k + 250)
					if dt == tensor.Int64 && k == 2 {
						v += 1 << 31
					}
					off := ((r*l+c)*d + k) * size
					for x := 0; x < size; x++ {
						data[off+x] = byte(v >> (8 * x))
					}
				}
			}
		}
		e := tensor.Element{Tensors: []tensor.Tensor{
			{Name: "tokens", DType: dt, Shape: []int64{b, l, d}, Data: data},
			{Name: "tokens_length", DType: tensor.Int32, Shape: []int64{b}, Data: i32s(lens...)},
		}}
		f, err := EncodeWith(codec, Header{}, e, ShippedEncodeOptions)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v narrow=%d", dt, f.m.Tensors[0].Narrow)
		for _, c := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
			z, err := f.Compressed(c)
			if err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			z.WriteTo(&w)
			_, got, err := Decode(codec, &w, Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if where, ok := equalElements(e, got); !ok {
				t.Fatalf("%v %v: differs in %s", dt, c, where)
			}
		}
	}
}

// Compressed, unpadded and narrowed batches through a Receiver: earlier
// batches survive later ones (its scratch and wire buffers are reused).
func TestStreamCompressedNarrowedSurvive(t *testing.T) {
	for _, c := range []Compression{CompressLZ4, CompressZstd} {
		p := newPair(t, transport.FastConfig())
		snd, rcv := p.streamWith(t, OpenRequest{Job: "j", Window: 4, Compression: c}, 4, ReceiverConfig{}, nil)
		ctx := testutil.Ctx(t, 10*time.Second)
		var sent []tensor.Element
		for i := range 6 {
			e := tokenBatch(16+i, 64)
			binary.LittleEndian.PutUint64(e.Tensors[1].Data, uint64(1000+i))
			sent = append(sent, e)
		}
		got := sendAll(t, ctx, p.worker.Codec, snd, rcv, sent, ShippedEncodeOptions)
		for i := range sent {
			if where, ok := equalElements(sent[i], got[i]); !ok {
				t.Fatalf("%v batch %d differs in %s", c, i, where)
			}
		}
	}
}

func i32s(vs ...int32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// A tail larger than the zstd window (a multi-segment zstd frame) still
// fits the decoder's window bound and round-trips, as does lz4.
func TestCompressedLargeTail(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i / 64 % 7)
	}
	compressedRoundTrip(t, data)
}

// AcceptWith lets the worker decide the compression: it may keep the one
// asked for or refuse it (anything else it returns counts as a refusal),
// and a refused stream's frames arrive uncompressed, as its Accept says.
func TestAcceptWithChoosesCompression(t *testing.T) {
	cases := []struct {
		ask, choose, want Compression
	}{
		{CompressLZ4, CompressLZ4, CompressLZ4},
		{CompressLZ4, CompressNone, CompressNone},
		{CompressLZ4, CompressZstd, CompressNone}, // not what was asked: none
		{CompressNone, CompressZstd, CompressNone},
	}
	for _, tc := range cases {
		p := newPair(t, transport.FastConfig())
		ctx := testutil.Ctx(t, 10*time.Second)
		rcv, err := OpenConfig(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Job: "j", Window: 4, Compression: tc.ask}, ReceiverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rcv.Close() })
		c, err := p.worker.T.Listener(transport.KindData).Accept()
		if err != nil {
			t.Fatal(err)
		}
		var asked OpenRequest
		snd, _, err := AcceptWith(ctx, p.worker.Codec, c, 16, func(req OpenRequest) Compression {
			asked = req
			return tc.choose
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { snd.Close() })
		if asked.Compression != tc.ask || asked.Job != "j" {
			t.Fatalf("choose got %+v", asked)
		}
		if snd.Compression() != tc.want {
			t.Fatalf("ask %v, choose %v: sender in force %v, want %v", tc.ask, tc.choose, snd.Compression(), tc.want)
		}
		e := tokenBatch(64, 96)
		done := sendAllThenEnd(ctx, snd, []*Frame{encode(t, p.worker.Codec, 0, e)})
		_, got, err := rcv.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if what, ok := equalElements(e, got); !ok {
			t.Fatalf("batch differs (%s)", what)
		}
		if rcv.Compression() != tc.want {
			t.Fatalf("ask %v, choose %v: the Accept said %v, want %v", tc.ask, tc.choose, rcv.Compression(), tc.want)
		}
		// Compressed, the token batch takes well under its raw tail.
		if compressed := rcv.LastWireBytes() < int64(e.ByteSize())/2; compressed != (tc.want != CompressNone) {
			t.Fatalf("ask %v, choose %v: %d wire bytes for a %d-byte batch", tc.ask, tc.choose, rcv.LastWireBytes(), e.ByteSize())
		}
		if _, _, err := rcv.Next(ctx); err != io.EOF {
			t.Fatalf("after the batch: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
