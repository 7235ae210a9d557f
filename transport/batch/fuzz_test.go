package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// FuzzDecode feeds arbitrary bytes to Decode. The seed corpus in
// testdata/fuzz/FuzzDecode holds valid frames and every malformed case of
// TestDecodeRejectsMalformed; regenerate it with
// FEEDMESH_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus ./transport/batch.
//
// Properties: no panic; failures are io.EOF or wrap ErrMalformedBatch; the
// tail buffer requested never exceeds the codec's frame bound; an accepted
// batch holds valid tensors and survives re-encoding unchanged.
func FuzzDecode(f *testing.F) {
	codec, err := transport.NewCodec(4<<10, 64<<10)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		alloc := func(n int) []byte {
			if int64(n) > codec.MaxFrameBytes() {
				t.Fatalf("alloc(%d) beyond the frame bound", n)
			}
			return make([]byte, n)
		}
		h, e, err := Decode(codec, bytes.NewReader(data), DefaultLimits(), alloc)
		if err != nil {
			if err != io.EOF && !errors.Is(err, ErrMalformedBatch) {
				t.Fatalf("error not io.EOF nor ErrMalformedBatch: %v", err)
			}
			return
		}
		for i := range e.Tensors {
			if err := e.Tensors[i].Validate(); err != nil {
				t.Fatalf("accepted an invalid tensor: %v", err)
			}
		}
		fr, err := Encode(codec, h, e)
		if errors.Is(err, transport.ErrFrameTooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("re-encode an accepted batch: %v", err)
		}
		var wire bytes.Buffer
		if _, err := fr.WriteTo(&wire); err != nil {
			t.Fatal(err)
		}
		h2, e2, err := Decode(codec, &wire, DefaultLimits(), nil)
		if err != nil {
			t.Fatalf("decode the re-encoded batch: %v", err)
		}
		if what, ok := equalElements(e, e2); !ok || h2.Seq != h.Seq || h2.Worker != h.Worker || h2.Epoch != h.Epoch || !slices.Equal(h2.Prov, h.Prov) || !bytes.Equal(h2.Extra, h.Extra) {
			t.Fatalf("re-encoded batch differs (%s)", what)
		}
	})
}

// TestWriteFuzzCorpus regenerates the checked-in seed corpus when
// FEEDMESH_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("FEEDMESH_WRITE_CORPUS") == "" {
		t.Skip("set FEEDMESH_WRITE_CORPUS=1 to regenerate testdata/fuzz/FuzzDecode")
	}
	codec := testCodec(t)
	seeds := malformedCases(t, codec)
	valid := map[string]tensor.Element{
		"valid all dtypes": allDTypes(t),
		"valid empty":      {},
		"valid numbered":   numbered(t, 3, 100),
	}
	for name, e := range valid {
		f, err := Encode(codec, Header{Seq: 3, Worker: "w", Epoch: 1, Prov: []ProvRange{{1, 1, 0, 2}, {1, 2, 5, 9}}}, e)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := f.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		seeds[name] = b.Bytes()
	}
	for _, c := range append([]Compression{CompressNone}, compressions...) {
		f, err := EncodeWith(codec, Header{Seq: 4, Worker: "w"}, tokenBatch(8, 32), ShippedEncodeOptions)
		if err != nil {
			t.Fatal(err)
		}
		z, err := f.Compressed(c)
		if err != nil || (z == f) != (c == CompressNone) || z.m.Tensors[0].Narrow != 2 {
			t.Fatalf("%v: %v", c, err)
		}
		var b bytes.Buffer
		if _, err := z.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		seeds["valid narrow "+c.String()] = b.Bytes()
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(seeds))
	for n := range seeds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		file := filepath.Join(dir, "seed-"+sanitize(n))
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seeds[n])
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}
