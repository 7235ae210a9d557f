package batch

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
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
				f, err := EncodeWith(codec, Header{Seq: 7, Worker: "w", Splits: []int64{3}}, e, EncodeOptions{Unpadded: unpadded})
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
				if what, ok := equalElements(e, got); !ok || h.Seq != 7 || h.Worker != "w" || len(h.Splits) != 1 {
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
	codec := testCodec(t)
	raw := bytes.Repeat([]byte("abcdefgh"), 8)
	e := tensor.Element{Tensors: []tensor.Tensor{{Name: "x", DType: tensor.Uint8, Shape: []int64{64}, Data: raw}}}
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
		if _, got, err := Decode(codec, &wire, DefaultLimits(), nil); err != nil || !bytes.Equal(got.Tensors[0].Data, raw) {
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
		ctx := ctxT(t, 10*time.Second)
		var cc *countingConn
		snd, rcv := p.streamWith(t, OpenRequest{Job: "j", Window: 4, Compression: c}, 16, ReceiverConfig{},
			func(conn net.Conn) net.Conn { cc = &countingConn{Conn: conn}; return cc })
		fs := make([]*Frame, n)
		want := make([]tensor.Element, n)
		for i := range fs {
			want[i] = tokenBatch(32+i, 96)
			fs[i] = encode(t, p.worker.codec, i, want[i])
		}
		done := make(chan error, 1)
		go func() {
			_, err := snd.SendAll(ctx, fs)
			if err == nil {
				err = snd.End(nil)
			}
			done <- err
		}()
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

// A client asking for a compression the worker does not know gets an End
// saying so.
func TestOpenUnknownCompression(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := ctxT(t, 5*time.Second)
	if _, err := OpenConfig(ctx, p.client.t, p.client.codec, p.worker.addr(), OpenRequest{Job: "j", Window: 1, Compression: 9}, ReceiverConfig{}); err == nil {
		t.Fatal("Open accepted an unknown compression")
	}
	s, err := p.client.t.Dial(ctx, p.worker.addr(), transport.KindData)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := p.client.codec.WriteFrame(s, &wireMsg{Kind: kindOpen, Job: "j", Window: 1, Comp: 9}); err != nil {
		t.Fatal(err)
	}
	c, err := p.worker.t.Listener(transport.KindData).Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Accept(ctx, p.worker.codec, c, 4); err == nil || !strings.Contains(err.Error(), "compression(9)") {
		t.Fatalf("Accept: %v, want an unknown-compression error", err)
	}
	var m wireMsg
	if _, err := readMsg(p.client.codec, s, &m, Limits{}, nil, nil); err != nil || m.Kind != kindEnd || !m.Failed || !strings.Contains(m.Error, "compression(9)") {
		t.Fatalf("client got %+v, %v; want an End naming the compression", m, err)
	}
}
