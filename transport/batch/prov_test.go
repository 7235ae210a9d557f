package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/fxamacker/cbor/v2"
)

// manyProv is a valid provenance of n ranges over several epochs and
// splits, with values of every CBOR integer width.
func manyProv(n int) []ProvRange {
	var p []ProvRange
	splitIDs := []int64{0, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1 << 40}
	gaps := []int64{1, 22, 230, 65000, 1 << 32}
	for epoch := int64(0); ; epoch++ {
		for _, split := range splitIDs {
			hi := int64(-1)
			for j := range 50 {
				if len(p) == n {
					return p
				}
				lo := hi + gaps[j%len(gaps)]
				hi = lo + 1 + int64(j%3)
				p = append(p, ProvRange{epoch, split, lo, hi})
			}
		}
	}
}

// Provenance survives Encode and Decode unchanged, by the fast path and by
// the CBOR mode (a header with Extra is left to the CBOR mode), also with
// many ranges, and counts its elements.
func TestProvRoundTrip(t *testing.T) {
	codec, err := transport.NewCodec(1<<20, 4<<20) // room for the large provenance
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 64, 3000, DefaultLimits().MaxProvRanges} {
		prov := manyProv(n)
		if err := checkProv(prov); err != nil || len(prov) != n {
			t.Fatalf("manyProv(%d): %d ranges, %v", n, len(prov), err)
		}
		for _, path := range []string{"fast", "cbor"} {
			h := Header{Seq: 5, Worker: "w", Epoch: 1, Prov: prov}
			if path == "cbor" {
				h.Extra = cbor.RawMessage{0xa1, 0x01, 0x02}
			}
			e := numbered(t, 2, 10)
			f, err := Encode(codec, h, e)
			if err != nil {
				t.Fatalf("%d ranges, %s: %v", n, path, err)
			}
			var wire bytes.Buffer
			if _, err := f.WriteTo(&wire); err != nil {
				t.Fatal(err)
			}
			var m wireMsg
			if took := m.DecodeHeader(headerOf(t, wire.Bytes())); took != (path == "fast") {
				t.Fatalf("%d ranges, %s: the fast path took the header: %v", n, path, took)
			}
			gh, ge, err := Decode(codec, bytes.NewReader(wire.Bytes()), DefaultLimits(), nil)
			if err != nil {
				t.Fatalf("%d ranges, %s: %v", n, path, err)
			}
			if what, ok := equalElements(e, ge); !ok {
				t.Fatalf("%d ranges, %s: element differs in %s", n, path, what)
			}
			if !slices.Equal(gh.Prov, prov) || gh.Seq != 5 || gh.Worker != "w" || gh.Epoch != 1 {
				t.Fatalf("%d ranges, %s: decoded header %+v", n, path, gh)
			}
			if (gh.Prov == nil) != (n == 0) {
				t.Fatalf("%d ranges, %s: Prov %v", n, path, gh.Prov)
			}
			if want := (Header{Prov: prov}).Elements(); gh.Elements() != want {
				t.Fatalf("%d ranges, %s: %d elements, want %d", n, path, gh.Elements(), want)
			}
			// The decoded ranges are the header's own: appending to them
			// does not write into other decoded slices.
			gh.Prov = append(gh.Prov, ProvRange{9, 9, 0, 1})
			if gh.Tensors[1].Shape[0] != 10 {
				t.Fatal("appending to Prov changed a tensor shape")
			}
		}
	}
}

// provReject is a batch header provenance every decoder must reject, and
// what the error must name.
type provReject struct {
	flat []int64
	want string
}

func provRejects() map[string]provReject {
	tooMany := make([]int64, 0, 4*(DefaultLimits().MaxProvRanges+1))
	for i := range int64(DefaultLimits().MaxProvRanges + 1) {
		tooMany = append(tooMany, 0, i, 0, 1)
	}
	return map[string]provReject{
		"prov 3 ints":           {[]int64{0, 1, 2}, "not 4 (epoch, split, lo, hi) a range"},
		"prov 5 ints":           {[]int64{0, 1, 2, 3, 4}, "not 4 (epoch, split, lo, hi) a range"},
		"prov too many":         {tooMany, "16385 provenance ranges, limit 16384"},
		"prov negative epoch":   {[]int64{-1, 0, 0, 1}, "negative epoch"},
		"prov negative split":   {[]int64{0, -3, 0, 1}, "negative split"},
		"prov negative start":   {[]int64{0, 0, -1, 1}, "negative start"},
		"prov empty":            {[]int64{0, 0, 5, 5}, "empty or reversed"},
		"prov reversed":         {[]int64{0, 0, 5, 2}, "empty or reversed"},
		"prov min int64":        {[]int64{0, 0, math.MinInt64, math.MaxInt64}, "negative start"},
		"prov epochs unsorted":  {[]int64{2, 0, 0, 1, 1, 0, 0, 1}, "out of order after epoch 2, split 0"},
		"prov splits unsorted":  {[]int64{0, 7, 0, 1, 0, 3, 0, 1}, "out of order after epoch 0, split 7"},
		"prov starts unsorted":  {[]int64{0, 7, 10, 12, 0, 7, 0, 1}, "out of order after [10, 12) of the same split"},
		"prov overlapping":      {[]int64{0, 7, 0, 10, 0, 7, 5, 12}, "overlaps or touches [0, 10)"},
		"prov adjacent":         {[]int64{0, 7, 0, 10, 0, 7, 10, 12}, "overlaps or touches [0, 10)"},
		"prov duplicate":        {[]int64{0, 7, 0, 10, 0, 7, 0, 10}, "overlaps or touches [0, 10)"},
		"prov later bad":        {[]int64{0, 1, 0, 1, 0, 2, 0, 1, 0, 3, 4, 4}, "provenance range 2 (epoch 0, split 3, [4, 4)): empty"},
		"prov contained":        {[]int64{3, 7, 0, 100, 3, 7, 20, 30}, "overlaps or touches [0, 100)"},
		"prov max then overlap": {[]int64{0, 0, 0, math.MaxInt64, 0, 0, math.MaxInt64 - 1, math.MaxInt64}, "overlaps or touches"},
	}
}

// Decode rejects every malformed provenance with an error that names what
// is wrong, and Encode refuses to send one.
func TestProvRejected(t *testing.T) {
	codec, err := transport.NewCodec(1<<20, 4<<20) // the header bound does not reject "too many"
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range provRejects() {
		frame := rawFrame(t, codec, &wireMsg{Kind: kindBatch, Seq: 1, Prov: c.flat})
		_, _, err := Decode(codec, bytes.NewReader(frame), DefaultLimits(), nil)
		if !errors.Is(err, ErrMalformedBatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode: %v, want ErrMalformedBatch naming %q", name, err, c.want)
		}
		if len(c.flat)%4 != 0 || name == "prov too many" {
			continue
		}
		_, err = Encode(codec, Header{Prov: provView(c.flat)}, tensor.Element{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Encode: %v, want an error naming %q", name, err, c.want)
		}
	}
	// A tighter limit rejects what the default accepts.
	frame := rawFrame(t, codec, &wireMsg{Kind: kindBatch, Prov: []int64{0, 1, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1}})
	if _, _, err := Decode(codec, bytes.NewReader(frame), DefaultLimits(), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Decode(codec, bytes.NewReader(frame), Limits{MaxProvRanges: 2}, nil); !errors.Is(err, ErrMalformedBatch) || !strings.Contains(err.Error(), "3 provenance ranges, limit 2") {
		t.Fatalf("MaxProvRanges 2: %v", err)
	}
}

// Runs that touch across splits or epochs, and the same split in two
// epochs, are valid; so is a header with no provenance.
func TestProvAccepted(t *testing.T) {
	codec := testCodec(t)
	for _, prov := range [][]ProvRange{
		nil,
		{},
		{{0, 0, 0, 1}},
		{{0, 1, 0, 5}, {0, 2, 5, 9}, {1, 1, 5, 9}},
		{{0, 1, 0, 5}, {0, 1, 6, 9}, {1, 0, 9, 10}},
		{{0, 0, 0, math.MaxInt64}, {math.MaxInt64, math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64}},
	} {
		f, err := Encode(codec, Header{Prov: prov}, tensor.Element{})
		if err != nil {
			t.Fatalf("%v: %v", prov, err)
		}
		var wire bytes.Buffer
		if _, err := f.WriteTo(&wire); err != nil {
			t.Fatal(err)
		}
		h, _, err := Decode(codec, &wire, DefaultLimits(), nil)
		if err != nil || len(h.Prov) != len(prov) || (len(prov) > 0 && !slices.Equal(h.Prov, prov)) {
			t.Fatalf("%v: decoded %v, %v", prov, h.Prov, err)
		}
	}
}

// A header from a sender that still wrote key 5 (Splits) decodes, the key
// ignored.
func TestOldSplitsKeyIgnored(t *testing.T) {
	codec := testCodec(t)
	hdr := map[int]any{0: int(kindBatch), 1: 7, 3: "w", 5: []int64{1, 2, 3}}
	frame := rawFrame(t, codec, hdr)
	h, e, err := Decode(codec, bytes.NewReader(frame), DefaultLimits(), nil)
	if err != nil || h.Seq != 7 || h.Worker != "w" || h.Prov != nil || len(e.Tensors) != 0 {
		t.Fatalf("decoded %+v, %v", h, err)
	}
}

// AppendProv builds the minimal, valid provenance of a batch's elements
// from one ranges.Set per (epoch, split), and Elements counts them:
// checked against a set of (epoch, split, index) triples.
func TestAppendProv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type key struct{ epoch, split int64 }
	for trial := range 200 {
		sets := map[key]map[int64]bool{}
		n := 1 + rng.IntN(300)
		for range n {
			k := key{rng.Int64N(3), rng.Int64N(4)}
			if sets[k] == nil {
				sets[k] = map[int64]bool{}
			}
			sets[k][rng.Int64N(int64(1+trial))] = true
		}
		keys := make([]key, 0, len(sets))
		for k := range sets {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b key) int {
			if a.epoch != b.epoch {
				return int(a.epoch - b.epoch)
			}
			return int(a.split - b.split)
		})
		var prov []ProvRange
		var elements int64
		for _, k := range keys {
			var r ranges.Set
			for i := range sets[k] {
				r.Add(i)
			}
			elements += int64(len(sets[k]))
			prov = AppendProv(prov, k.epoch, k.split, r)
		}
		if err := checkProv(prov); err != nil {
			t.Fatalf("trial %d: %v: %v", trial, prov, err)
		}
		if got := (Header{Prov: prov}).Elements(); got != elements {
			t.Fatalf("trial %d: Elements %d, want %d", trial, got, elements)
		}
		got := map[key]map[int64]bool{}
		for _, p := range prov {
			k := key{p.Epoch, p.Split}
			if got[k] == nil {
				got[k] = map[int64]bool{}
			}
			for i := p.Lo; i < p.Hi; i++ {
				got[k][i] = true
			}
		}
		if !reflect.DeepEqual(got, sets) {
			t.Fatalf("trial %d: provenance %v holds other elements", trial, prov)
		}
	}
	// In-order delivery, one element at a time, merges into one run.
	var p []ProvRange
	for i := range int64(64) {
		p = AppendProvSpan(p, 1, 2, i, i+1)
	}
	if !slices.Equal(p, []ProvRange{{1, 2, 0, 64}}) {
		t.Fatalf("64 in-order elements: %v", p)
	}
	if p = AppendProvSpan(p, 1, 2, 70, 70); len(p) != 1 {
		t.Fatalf("an empty span was appended: %v", p)
	}
	if n := (Header{Prov: []ProvRange{{0, 0, 0, math.MaxInt64}, {0, 1, 0, math.MaxInt64}}}).Elements(); n != math.MaxInt64 {
		t.Fatalf("Elements of an overflowing provenance: %d", n)
	}
}

// benchProv is the provenance of a batch of 64 elements: none, one run of
// one split, or 64 single elements of 64 splits (a fully shuffled batch).
func benchProv(kind string) []ProvRange {
	switch kind {
	case "none":
		return nil
	case "1range":
		return []ProvRange{{Epoch: 3, Split: 1207, Lo: 4096, Hi: 4160}}
	}
	var p []ProvRange
	for i := range int64(64) {
		p = append(p, ProvRange{Epoch: 3, Split: 1000 + 7*i, Lo: 5000 + 13*i, Hi: 5001 + 13*i})
	}
	return p
}

// BenchmarkHeaderProv: the header of a shipped 64-row text batch, by its
// provenance, encoded as EncodeWith does it (provenance checked, then the
// CBOR library) and decoded as a receiver does it (the fast path with names
// cached, or the CBOR library; then planTail's provenance check and the
// Header): encode+fast is a batch header's round trip on a stream, encode,
// fast and cbor its parts. hdr-bytes is the encoded header's size.
func BenchmarkHeaderProv(b *testing.B) {
	codec := testCodec(b)
	e := tokenBatch(64, 40)
	for _, kind := range []string{"none", "1range", "64ranges"} {
		h := Header{Seq: 77, Worker: "node-1", Epoch: 3, Prov: benchProv(kind)}
		f, err := EncodeWith(codec, h, e, ShippedEncodeOptions)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(f.hdr, headerOf(b, frameBytes(b, f))) {
			b.Fatal("f.hdr is not the header on the wire")
		}
		encode := func() []byte {
			if err := checkProv(h.Prov); err != nil {
				b.Fatal(err)
			}
			w := f.m
			w.Prov = flatProv(h.Prov)
			hdr, err := codec.Marshal(&w)
			if err != nil {
				b.Fatal(err)
			}
			return hdr
		}
		if !bytes.Equal(encode(), f.hdr) {
			b.Fatal("the benchmark encodes another header than EncodeWith")
		}
		var names fastNames
		decode := func(hdr []byte, fast bool) {
			m := wireMsg{names: &names}
			if fast {
				if !m.DecodeHeader(hdr) {
					b.Fatal("refused")
				}
			} else if err := codec.Unmarshal(hdr, &m); err != nil {
				b.Fatal(err)
			}
			if err := checkWireProv(m.Prov, DefaultLimits()); err != nil {
				b.Fatal(err)
			}
			if got := m.header(); len(got.Prov) != len(h.Prov) {
				b.Fatal("lost provenance")
			}
		}
		for _, op := range []string{"encode+fast", "encode", "fast", "cbor"} {
			b.Run(fmt.Sprintf("prov=%s/%s", kind, op), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					switch op {
					case "encode+fast":
						decode(encode(), true)
					case "encode":
						encode()
					default:
						decode(f.hdr, op == "fast")
					}
				}
				b.ReportMetric(float64(len(f.hdr)), "hdr-bytes")
			})
		}
	}
}

func frameBytes(tb testing.TB, f *Frame) []byte {
	tb.Helper()
	var w bytes.Buffer
	if _, err := f.WriteTo(&w); err != nil {
		tb.Fatal(err)
	}
	return w.Bytes()
}
