package batch

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// headerOf returns the CBOR header of an encoded frame.
func headerOf(tb testing.TB, frame []byte) []byte {
	tb.Helper()
	if len(frame) < 13 {
		return nil
	}
	n := int(binary.BigEndian.Uint32(frame[1:5]))
	if n > len(frame)-13 {
		return nil
	}
	return frame[13 : 13+n]
}

// encodedHeader is the header EncodeWith writes for e.
func encodedHeader(tb testing.TB, codec *transport.Codec, h Header, e tensor.Element, o EncodeOptions, c Compression) []byte {
	tb.Helper()
	f, err := EncodeWith(codec, h, e, o)
	if err != nil {
		tb.Fatal(err)
	}
	if f, err = f.Compressed(c); err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(headerOf(tb, b.Bytes()))
}

// fastHeaderSeeds: headers the fast path must take (what the encoder
// writes for batches) and ones it must leave to the CBOR library.
func fastHeaderSeeds(tb testing.TB, codec *transport.Codec) (take, leave map[string][]byte) {
	take = map[string][]byte{
		"all dtypes":        encodedHeader(tb, codec, Header{Seq: 3, Worker: "w", Epoch: 1, Prov: []ProvRange{{1, 1, 0, 2}, {1, 2, 5, 9}}}, allDTypes(tb), EncodeOptions{}, CompressNone),
		"empty":             encodedHeader(tb, codec, Header{}, tensor.Element{}, EncodeOptions{}, CompressNone),
		"negative epoch":    encodedHeader(tb, codec, Header{Seq: 1 << 40, Worker: "wörker", Epoch: -5, Prov: []ProvRange{}}, numbered(tb, 3, 100), EncodeOptions{}, CompressNone),
		"unpadded":          encodedHeader(tb, codec, Header{Seq: 9}, paddedBatch([]int32{3, 40, 0, 7}, 40, -1), EncodeOptions{Unpadded: true}, CompressNone),
		"narrow lz4":        encodedHeader(tb, codec, Header{Seq: 4, Worker: "w"}, tokenBatch(8, 32), ShippedEncodeOptions, CompressLZ4),
		"narrow zstd":       encodedHeader(tb, codec, Header{Seq: 4, Worker: "w"}, tokenBatch(8, 32), ShippedEncodeOptions, CompressZstd),
		"shipped text":      encodedHeader(tb, codec, Header{Seq: 77, Worker: "node-1", Epoch: 2, Prov: []ProvRange{{2, 12, 0, 64}}}, tokenBatch(64, 40), ShippedEncodeOptions, CompressNone),
		"long prov":         encodedHeader(tb, codec, Header{Prov: []ProvRange{{0, 0, 0, 23}, {0, 0, 24, 255}, {0, 23, 256, 65535}, {24, 1 << 32, 65536, 1 << 32}, {1<<63 - 1, 1<<63 - 1, 0, 1<<63 - 1}}}, tensor.Element{}, EncodeOptions{}, CompressNone),
		"max int64 seq/ep":  encodedHeader(tb, codec, Header{Seq: 1<<64 - 1, Epoch: -1 << 63}, tensor.Element{}, EncodeOptions{}, CompressNone),
		"non-minimal seq 5": {0xa2, 0x00, 0x01, 0x01, 0x18, 0x05},
	}
	marshal := func(v any) []byte {
		b, err := codec.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	// The fast path decodes any integers; planTail checks them.
	take["prov, unchecked"] = marshal(&wireMsg{Kind: kindBatch, Prov: []int64{-1, -25, -257, 1 << 32, 5, math.MinInt64, math.MaxInt64}})
	leave = map[string][]byte{
		"extra":             encodedHeader(tb, codec, Header{Extra: marshal(map[string]int{"round": 3})}, tensor.Element{}, EncodeOptions{}, CompressNone),
		"open":              marshal(&wireMsg{Kind: kindOpen, Version: ProtocolVersion, Job: "j", Consumer: "c", Window: 4}),
		"accept":            marshal(&wireMsg{Kind: kindAccept, Version: ProtocolVersion, Window: 4, MaxWindow: 64, Comp: CompressLZ4}),
		"version refusal":   marshal(&wireMsg{Kind: kindEnd, Failed: true, Error: "unsupported", Version: 3, MinVersion: 2}),
		"end":               marshal(&wireMsg{Kind: kindEnd, Failed: true, Error: "boom", Sent: 3}),
		"credit":            marshal(&wireMsg{Kind: kindCredit, Credits: 4, Grow: 2}),
		"duplicate key":     {0xa2, 0x01, 0x01, 0x01, 0x02},
		"keys out of order": {0xa2, 0x01, 0x01, 0x00, 0x01},
		"indefinite map":    {0xbf, 0x00, 0x01, 0xff},
		"indefinite array":  {0xa1, 0x05, 0x9f, 0x01, 0xff},
		"trailing byte":     {0xa1, 0x00, 0x01, 0x00},
		"kind overflows":    {0xa1, 0x00, 0x19, 0x01, 0x00},
		"seq negative":      {0xa1, 0x01, 0x20},
		"epoch overflows":   {0xa1, 0x04, 0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0},
		"bad utf-8":         {0xa1, 0x03, 0x62, 0xff, 0xfe},
		"byte string name":  {0xa1, 0x03, 0x42, 'h', 'i'},
		"null worker":       {0xa1, 0x03, 0xf6},
		"huge array":        {0xa1, 0x17, 0x9b, 0, 0, 0, 1, 0, 0, 0, 0},
		"old splits key 5":  {0xa2, 0x00, 0x01, 0x05, 0x82, 0x01, 0x02},
		"prov of text":      {0xa2, 0x00, 0x01, 0x17, 0x81, 0x61, 'a'},
		"prov indefinite":   {0xa2, 0x00, 0x01, 0x17, 0x9f, 0x00, 0x00, 0x00, 0x01, 0xff},
		"truncated":         {0xa2, 0x00, 0x01, 0x01},
		"tag":               {0xa1, 0x01, 0xc1, 0x01},
		"not a map":         {0x80},
		"empty input":       {},
	}
	return take, leave
}

// The fast path takes every batch header the encoder writes (so it is what
// a stream of batches uses), decoding it as the CBOR library does, and
// leaves everything else to the library without touching the message.
func TestFastHeaderAgreesWithCBOR(t *testing.T) {
	codec := testCodec(t)
	take, leave := fastHeaderSeeds(t, codec)
	var names fastNames
	for name, b := range take {
		fast := wireMsg{names: &names}
		if !fast.DecodeHeader(b) {
			t.Errorf("%s: the fast path refused a header the encoder wrote (% x)", name, b)
			continue
		}
		var ref wireMsg
		if err := codec.Unmarshal(b, &ref); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fast.names = nil
		if !reflect.DeepEqual(fast, ref) {
			t.Errorf("%s: fast path decoded\n%+v\nthe CBOR library\n%+v", name, fast, ref)
		}
	}
	for name, b := range leave {
		m := wireMsg{Seq: 42, names: &names}
		if m.DecodeHeader(b) {
			t.Errorf("%s: the fast path took % x", name, b)
		}
		if !reflect.DeepEqual(m, wireMsg{Seq: 42, names: &names}) {
			t.Errorf("%s: the fast path changed the message it refused: %+v", name, m)
		}
	}
}

// A stream's headers reuse the strings of the ones before.
func TestFastHeaderInternsNames(t *testing.T) {
	codec := testCodec(t)
	b := encodedHeader(t, codec, Header{Worker: "node-1"}, tokenBatch(4, 8), ShippedEncodeOptions, CompressNone)
	var names fastNames
	m := wireMsg{names: &names}
	if !m.DecodeHeader(b) {
		t.Fatal("refused")
	}
	allocs := testing.AllocsPerRun(100, func() {
		m := wireMsg{names: &names}
		m.DecodeHeader(b)
	})
	// The tensors slice, one backing array for the shapes, the padding
	// value; no strings.
	if allocs > 3 {
		t.Fatalf("%.0f allocations per header, want at most 3 (names reused)", allocs)
	}
}

// FuzzFastHeader: whatever the fast path accepts, the codec's CBOR mode
// accepts too and decodes to the same message; what it refuses, it leaves
// untouched.
func FuzzFastHeader(f *testing.F) {
	codec := testCodec(f)
	take, leave := fastHeaderSeeds(f, codec)
	for _, b := range take {
		f.Add(b)
	}
	for _, b := range leave {
		f.Add(b)
	}
	for _, frame := range malformedCases(f, codec) {
		if h := headerOf(f, frame); h != nil {
			f.Add(h)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var names fastNames
		names.intern([]byte("tokens")) // a cached name, as on a stream
		m := wireMsg{names: &names}
		ok := m.DecodeHeader(b)
		var ref wireMsg
		err := codec.Unmarshal(b, &ref)
		if !ok {
			if !reflect.DeepEqual(m, wireMsg{names: &names}) {
				t.Fatalf("refused, but changed the message: %+v", m)
			}
			return
		}
		if err != nil {
			t.Fatalf("the fast path accepted what the CBOR mode rejects (%v): % x", err, b)
		}
		m.names = nil
		if !reflect.DeepEqual(m, ref) {
			t.Fatalf("fast path decoded\n%+v\nthe CBOR library\n%+v\nfrom % x", m, ref, b)
		}
	})
}

// BenchmarkHeaderDecode: a shipped text batch's header (64 rows), by the
// fast path (as a Receiver, names cached) and by the CBOR library.
func BenchmarkHeaderDecode(b *testing.B) {
	codec := testCodec(b)
	h := encodedHeader(b, codec, Header{Seq: 77, Worker: "node-1", Epoch: 2, Prov: []ProvRange{{2, 12, 0, 64}}}, tokenBatch(64, 40), ShippedEncodeOptions, CompressNone)
	b.Run("fast", func(b *testing.B) {
		var names fastNames
		b.ReportAllocs()
		for b.Loop() {
			m := wireMsg{names: &names}
			if !m.DecodeHeader(h) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("cbor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m wireMsg
			if err := codec.Unmarshal(h, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The codec's CBOR mode refuses arrays over transport.MaxCBORElements; so
// does the fast path, though the header bound would allow them.
func TestFastHeaderRefusesTooManyElements(t *testing.T) {
	codec := testCodec(t)
	n := transport.MaxCBORElements + 1
	b := append([]byte{0xa1, 0x17, 0x9a}, binary.BigEndian.AppendUint32(nil, uint32(n))...)
	b = append(b, make([]byte, n)...) // n provenance integers, each 0
	var ref wireMsg
	if err := codec.Unmarshal(b, &ref); err == nil {
		t.Fatal("the CBOR mode took an array over its bound: the test tests nothing")
	}
	var m wireMsg
	if m.DecodeHeader(b) {
		t.Fatalf("the fast path took %d provenance integers", n)
	}
}
