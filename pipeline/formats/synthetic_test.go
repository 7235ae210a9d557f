package formats

import (
	"bytes"
	"context"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

func readSynthetic(t testing.TB, o SyntheticOptions) []tensor.Element {
	t.Helper()
	splits, err := SyntheticSplits(o)
	if err != nil {
		t.Fatal(err)
	}
	var all []tensor.Element
	for _, s := range splits {
		it, err := OpenSynthetic(context.Background(), o, s)
		if err != nil {
			t.Fatal(err)
		}
		els, err := drain(t, it)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, els...)
	}
	return all
}

func TestSyntheticIndependentOfSplits(t *testing.T) {
	for _, kind := range []string{"text", "image", "records"} {
		base := SyntheticOptions{Kind: kind, Count: 37, Seed: 11, Width: 8, Height: 6, RecordBytes: 13}
		one := readSynthetic(t, base)
		if len(one) != 37 {
			t.Fatalf("%s: %d elements", kind, len(one))
		}
		for _, ss := range []int64{1, 5, 36, 100} {
			o := base
			o.SplitSize = ss
			if got := readSynthetic(t, o); !reflect.DeepEqual(got, one) {
				t.Fatalf("%s: split_size %d changes the data", kind, ss)
			}
		}
		o := base
		o.Seed = 12
		if reflect.DeepEqual(readSynthetic(t, o), one) {
			t.Fatalf("%s: seed has no effect", kind)
		}
		for i, e := range one {
			if int64Of(t, e, "id") != int64(i) {
				t.Fatalf("%s: id %d", kind, i)
			}
		}
	}
}

func TestSyntheticText(t *testing.T) {
	o := SyntheticOptions{Kind: "text", Count: 5000, Seed: 1, MinWords: 2, MaxWords: 400, MeanWords: 20, TailAlpha: 1.2}
	els := readSynthetic(t, o)
	var total, longest int
	for _, s := range texts(t, els, "text") {
		n := len(strings.Fields(s))
		if n < 2 || n > 400 || strings.Contains(s, "  ") {
			t.Fatalf("text of %d words: %q", n, s)
		}
		total += n
		longest = max(longest, n)
	}
	mean := float64(total) / float64(len(els))
	// The body's mean is 20; the Pareto tail (5 %, alpha 1.2) lifts it.
	if mean < 18 || mean > 40 {
		t.Fatalf("mean %v words", mean)
	}
	if longest < 200 {
		t.Fatalf("no heavy tail: longest text has %d words", longest)
	}
}

func TestSyntheticImages(t *testing.T) {
	raw := readSynthetic(t, SyntheticOptions{Kind: "image", Count: 3, Width: 10, Height: 7, Channels: 3})
	img, _ := raw[0].Get("image")
	if img.DType != tensor.Uint8 || !reflect.DeepEqual(img.Shape, []int64{7, 10, 3}) {
		t.Fatalf("raw image %s%v", img.DType, img.Shape)
	}
	if l := int64Of(t, raw[0], "label"); l < 0 || l >= DefaultClasses {
		t.Fatalf("label %d", l)
	}
	for _, enc := range []string{"png", "jpeg"} {
		for _, ch := range []int{1, 3} {
			els := readSynthetic(t, SyntheticOptions{Kind: "image", Count: 2, Width: 10, Height: 7, Channels: ch, Encoding: enc})
			b, _ := els[0].Get("image")
			cfg, format, err := image.DecodeConfig(bytes.NewReader(b.Entry(0)))
			if err != nil || format != enc || cfg.Width != 10 || cfg.Height != 7 {
				t.Fatalf("%s/%d: %v %s %+v", enc, ch, err, format, cfg)
			}
		}
	}
	// PNG is lossless: decoding gives the raw pixels back.
	p := readSynthetic(t, SyntheticOptions{Kind: "image", Count: 1, Width: 10, Height: 7, Channels: 3, Encoding: "png"})
	r := readSynthetic(t, SyntheticOptions{Kind: "image", Count: 1, Width: 10, Height: 7, Channels: 3})
	pb, _ := p[0].Get("image")
	dec, _, err := image.Decode(bytes.NewReader(pb.Entry(0)))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := r[0].Get("image")
	for y := 0; y < 7; y++ {
		for x := 0; x < 10; x++ {
			cr, cg, cb, _ := dec.At(x, y).RGBA()
			i := (y*10 + x) * 3
			if uint8(cr>>8) != rt.Data[i] || uint8(cg>>8) != rt.Data[i+1] || uint8(cb>>8) != rt.Data[i+2] {
				t.Fatalf("pixel %d,%d differs", x, y)
			}
		}
	}
}

func TestSyntheticRecordsIncompressible(t *testing.T) {
	els := readSynthetic(t, SyntheticOptions{Kind: "records", Count: 2, RecordBytes: 4099})
	rec, _ := els[0].Get("record")
	if len(rec.Entry(0)) != 4099 {
		t.Fatalf("record of %d bytes", len(rec.Entry(0)))
	}
	var hist [256]int
	for _, b := range rec.Entry(0) {
		hist[b]++
	}
	for v, n := range hist {
		if n > 50 {
			t.Fatalf("byte %d appears %d times: not random", v, n)
		}
	}
}

func TestSyntheticValidate(t *testing.T) {
	cases := []struct {
		o    SyntheticOptions
		want string
	}{
		{SyntheticOptions{Kind: "audio"}, "kind:"},
		{SyntheticOptions{Kind: "text", Count: -1}, "count:"},
		{SyntheticOptions{Kind: "text", SplitSize: -1}, "split_size:"},
		{SyntheticOptions{Kind: "text", MinWords: 10, MaxWords: 5}, "max_words:"},
		{SyntheticOptions{Kind: "text", MeanWords: -1}, "mean_words:"},
		{SyntheticOptions{Kind: "text", TailAlpha: -1}, "tail_alpha:"},
		{SyntheticOptions{Kind: "image", Channels: 2}, "channels:"},
		{SyntheticOptions{Kind: "image", Encoding: "gif"}, "encoding:"},
		{SyntheticOptions{Kind: "image", Encoding: "jpeg", Channels: 4}, "channels:"},
		{SyntheticOptions{Kind: "image", Width: -3}, "width:"},
		{SyntheticOptions{Kind: "records", RecordBytes: -1}, "record_bytes:"},
	}
	for _, c := range cases {
		if err := c.o.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want prefix %q", c.o, err, c.want)
		}
	}
	d := SyntheticOptions{Kind: "text", Width: 5}.WithDefaults()
	if d.Width != 0 || d.MaxWords != DefaultMaxWords || d.MeanWords != DefaultMeanWords {
		t.Fatalf("defaults %+v", d)
	}
}

func BenchmarkSyntheticText(b *testing.B) {
	o := SyntheticOptions{Kind: "text", Count: int64(b.N), Seed: 1}
	it, _ := OpenSynthetic(context.Background(), o, Split{Start: 0, End: int64(b.N)})
	defer it.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		e, err := it.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(e.Tensors[0].Data))
	}
	b.SetBytes(bytes / int64(max(b.N, 1)))
}
