package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/feedmesh/feedmesh/tensor"
)

// SyntheticOptions configure the synthetic source: deterministic generated
// data for demos and benchmarks. Element i depends only on (Seed, i), never
// on the split layout, so any split sizes give the same elements.
//
// Kind "text" yields tensors "text" (bytes scalar: words separated by single
// spaces) and "id" (int64). Words come from a fixed vocabulary of 4096
// lowercase pseudo-words with Zipf-like frequencies (s = 1.1). The length in
// words is drawn from a mixture with a heavy tail:
//
//   - with probability 0.95, a lognormal with σ = 0.5 whose mean is MeanWords;
//   - with probability 0.05, a Pareto with scale MeanWords and shape TailAlpha
//     (smaller TailAlpha, heavier tail: 1.5 gives occasional very long texts);
//
// rounded and clamped to [MinWords, MaxWords].
//
// Kind "image" yields "image", "label" (int64 in [0, Classes)) and "id".
// The picture is a colour gradient with a rectangle and pixel noise, so
// it compresses like a photo rather than like a flat colour. Encoding "raw"
// gives a uint8 [Height, Width, Channels] tensor; "png" or "jpeg" a bytes
// scalar holding the encoded file.
//
// Kind "records" yields "record" (bytes scalar of RecordBytes random,
// incompressible bytes) and "id".
type SyntheticOptions struct {
	// Kind is "text", "image" or "records".
	Kind string
	// Count is the number of elements.
	Count int64
	// Seed selects the generated data.
	Seed uint64
	// SplitSize is the number of elements per split; 0 puts all in one split.
	SplitSize int64

	// MinWords and MaxWords bound text lengths (defaults 1 and 1024).
	MinWords, MaxWords int64
	// MeanWords is the mean of the lognormal body (default 32).
	MeanWords float64
	// TailAlpha is the Pareto tail's shape (default 1.5).
	TailAlpha float64

	// Width, Height and Channels (1, 3 or 4) of images (defaults 64, 64, 3).
	Width, Height, Channels int
	// Encoding of images: "raw" (default), "png" or "jpeg" (1 or 3 channels).
	Encoding string
	// Classes is the number of distinct image labels (default 10).
	Classes int

	// RecordBytes is the size of each record (default 1024).
	RecordBytes int
}

// Synthetic defaults, applied by WithDefaults.
const (
	DefaultMinWords    = 1
	DefaultMaxWords    = 1024
	DefaultMeanWords   = 32
	DefaultTailAlpha   = 1.5
	DefaultImageSide   = 64
	DefaultChannels    = 3
	DefaultClasses     = 10
	DefaultRecordBytes = 1024
	// MaxSyntheticBytes bounds one generated element (image or record).
	MaxSyntheticBytes = 64 << 20

	tailProbability = 0.05
	bodySigma       = 0.5
)

// WithDefaults returns o with the zero fields that matter for its Kind
// replaced by their defaults; fields of other kinds are zeroed so that they
// do not change fingerprints.
func (o SyntheticOptions) WithDefaults() SyntheticOptions {
	out := SyntheticOptions{Kind: o.Kind, Count: o.Count, Seed: o.Seed, SplitSize: o.SplitSize}
	switch o.Kind {
	case "text":
		out.MinWords, out.MaxWords, out.MeanWords, out.TailAlpha = o.MinWords, o.MaxWords, o.MeanWords, o.TailAlpha
		if out.MinWords == 0 {
			out.MinWords = DefaultMinWords
		}
		if out.MaxWords == 0 {
			out.MaxWords = max(DefaultMaxWords, out.MinWords)
		}
		if out.MeanWords == 0 {
			out.MeanWords = DefaultMeanWords
		}
		if out.TailAlpha == 0 {
			out.TailAlpha = DefaultTailAlpha
		}
	case "image":
		out.Width, out.Height, out.Channels, out.Encoding, out.Classes = o.Width, o.Height, o.Channels, o.Encoding, o.Classes
		if out.Width == 0 {
			out.Width = DefaultImageSide
		}
		if out.Height == 0 {
			out.Height = DefaultImageSide
		}
		if out.Channels == 0 {
			out.Channels = DefaultChannels
		}
		if out.Encoding == "" {
			out.Encoding = "raw"
		}
		if out.Classes == 0 {
			out.Classes = DefaultClasses
		}
	case "records":
		out.RecordBytes = o.RecordBytes
		if out.RecordBytes == 0 {
			out.RecordBytes = DefaultRecordBytes
		}
	default:
		return o
	}
	return out
}

// Validate checks the options (after defaults); messages name the field.
func (o SyntheticOptions) Validate() error {
	o = o.WithDefaults()
	if o.Count < 0 {
		return errors.New("count: must be >= 0")
	}
	if o.SplitSize < 0 {
		return errors.New("split_size: must be >= 0 (0: one split)")
	}
	switch o.Kind {
	case "text":
		switch {
		case o.MinWords < 0:
			return errors.New("min_words: must be >= 0")
		case o.MaxWords < o.MinWords:
			return fmt.Errorf("max_words: must be >= min_words (%d)", o.MinWords)
		case o.MaxWords > 1<<20:
			return errors.New("max_words: must be <= 1048576")
		case !(o.MeanWords > 0) || math.IsInf(o.MeanWords, 0):
			return errors.New("mean_words: must be > 0")
		case !(o.TailAlpha > 0) || math.IsInf(o.TailAlpha, 0):
			return errors.New("tail_alpha: must be > 0")
		}
	case "image":
		switch {
		case o.Width < 1:
			return errors.New("width: must be > 0")
		case o.Height < 1:
			return errors.New("height: must be > 0")
		case o.Channels != 1 && o.Channels != 3 && o.Channels != 4:
			return errors.New("channels: must be 1, 3 or 4")
		case int64(o.Width)*int64(o.Height)*int64(o.Channels) > MaxSyntheticBytes:
			return fmt.Errorf("width: image of %dx%dx%d exceeds %d bytes", o.Width, o.Height, o.Channels, MaxSyntheticBytes)
		case o.Encoding != "raw" && o.Encoding != "png" && o.Encoding != "jpeg":
			return fmt.Errorf("encoding: %q is not raw, png or jpeg", o.Encoding)
		case o.Encoding == "jpeg" && o.Channels == 4:
			return errors.New("channels: jpeg supports 1 or 3 channels")
		case o.Classes < 1:
			return errors.New("classes: must be > 0")
		}
	case "records":
		if o.RecordBytes < 0 || o.RecordBytes > MaxSyntheticBytes {
			return fmt.Errorf("record_bytes: must be in [0, %d]", MaxSyntheticBytes)
		}
	default:
		return fmt.Errorf("kind: %q is not text, image or records", o.Kind)
	}
	return nil
}

// SyntheticSplits enumerates index ranges of SplitSize elements.
func SyntheticSplits(o SyntheticOptions) ([]Split, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("synthetic source: %w", err)
	}
	ss, err := indexSplits(o.Count, o.SplitSize)
	if err != nil {
		return nil, fmt.Errorf("synthetic source: %w", err)
	}
	return ss, nil
}

// SyntheticSplitter is SyntheticSplits computed on demand.
func SyntheticSplitter(o SyntheticOptions) (IndexSplitter, error) {
	if err := o.Validate(); err != nil {
		return IndexSplitter{}, fmt.Errorf("synthetic source: %w", err)
	}
	x, err := newIndexSplitter(o.Count, o.SplitSize)
	if err != nil {
		return IndexSplitter{}, fmt.Errorf("synthetic source: %w", err)
	}
	return x, nil
}

// OpenSynthetic opens an iterator over one split's elements.
func OpenSynthetic(ctx context.Context, o SyntheticOptions, s Split) (Iterator, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("synthetic source: %w", err)
	}
	start, end, err := checkIndexSplit(s, o.Count)
	if err != nil {
		return nil, fmt.Errorf("synthetic source: %w", err)
	}
	it := &synthIter{o: o.WithDefaults(), i: start, end: end}
	it.rng = rand.New(&it.pcg)
	return it, nil
}

type synthIter struct {
	o      SyntheticOptions
	i, end int64
	words  []uint16 // scratch for text, reused across elements
	pcg    rand.PCG
	rng    *rand.Rand // draws from pcg
}

// seedFor positions the iterator's generator for element i. The generator
// is reused, so generating an element allocates only its output.
func (it *synthIter) seedFor(i int64) *rand.Rand {
	it.pcg.Seed(it.o.Seed^0x6a09e667f3bcc909, uint64(i)*0x9e3779b97f4a7c15+0xbb67ae8584caa73b)
	return it.rng
}

func (it *synthIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.i >= it.end {
		return tensor.Element{}, io.EOF
	}
	i := it.i
	it.i++
	r := it.seedFor(i)
	id := tensor.ScalarInt64("id", i)
	switch it.o.Kind {
	case "text":
		return tensor.Element{Tensors: []tensor.Tensor{tensor.BytesScalar("text", it.text(r)), id}}, nil
	case "image":
		img, err := it.image(r)
		if err != nil {
			return tensor.Element{}, fmt.Errorf("synthetic image %d: %w", i, err)
		}
		label := tensor.ScalarInt64("label", int64(r.IntN(it.o.Classes)))
		return tensor.Element{Tensors: []tensor.Tensor{img, label, id}}, nil
	default:
		b := make([]byte, it.o.RecordBytes)
		fillRandom(r, b)
		return tensor.Element{Tensors: []tensor.Tensor{tensor.BytesScalar("record", b), id}}, nil
	}
}

func (it *synthIter) Close() error { return nil }

func fillRandom(r *rand.Rand, b []byte) {
	for len(b) >= 8 {
		v := r.Uint64()
		b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		b[4], b[5], b[6], b[7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		b = b[8:]
	}
	if len(b) > 0 {
		v := r.Uint64()
		for j := range b {
			b[j] = byte(v >> (8 * j))
		}
	}
}

// textLength draws a length in words from the documented mixture.
func textLength(r *rand.Rand, o SyntheticOptions) int64 {
	var x float64
	if r.Float64() < tailProbability {
		u := 1 - r.Float64() // (0, 1]
		x = o.MeanWords * math.Pow(u, -1/o.TailAlpha)
	} else {
		mu := math.Log(o.MeanWords) - bodySigma*bodySigma/2
		x = math.Exp(mu + bodySigma*r.NormFloat64())
	}
	n := int64(math.Round(min(x, float64(o.MaxWords))))
	return max(o.MinWords, min(o.MaxWords, n))
}

// text generates one element's text with a single allocation: word ids are
// drawn into reusable scratch, then copied into an exactly sized buffer.
func (it *synthIter) text(r *rand.Rand) []byte {
	n := textLength(r, it.o)
	if cap(it.words) < int(n) {
		it.words = make([]uint16, n)
	}
	ws := it.words[:n]
	size := 0
	for j := range ws {
		w := vocab.draw(r)
		ws[j] = w
		size += int(vocab.off[w+1] - vocab.off[w])
	}
	if n > 0 {
		size += int(n) - 1
	}
	out := make([]byte, 0, size)
	for j, w := range ws {
		if j > 0 {
			out = append(out, ' ')
		}
		out = append(out, vocab.data[vocab.off[w]:vocab.off[w+1]]...)
	}
	return out
}

const vocabSize = 4096

// vocab is the fixed synthetic vocabulary: words concatenated in data with
// offsets, and the cumulative Zipf distribution for drawing them.
var vocab = buildVocab()

type vocabTable struct {
	data []byte
	off  [vocabSize + 1]uint32
	cdf  [vocabSize]float64
}

func buildVocab() *vocabTable {
	v := &vocabTable{}
	r := rand.New(rand.NewPCG(1, 2))
	const letters = "etaoinshrdlucmfwypvbgkqjxz"
	seen := map[string]bool{}
	for i := 0; i < vocabSize; {
		// Frequent words are short, as in natural language.
		n := 2 + r.IntN(3+min(i/256, 8))
		w := make([]byte, n)
		for j := range w {
			w[j] = letters[min(r.IntN(26), r.IntN(26))]
		}
		if seen[string(w)] {
			continue
		}
		seen[string(w)] = true
		v.data = append(v.data, w...)
		i++
		v.off[i] = uint32(len(v.data))
	}
	total := 0.0
	for i := range v.cdf {
		total += math.Pow(float64(i+1), -1.1)
		v.cdf[i] = total
	}
	for i := range v.cdf {
		v.cdf[i] /= total
	}
	return v
}

func (v *vocabTable) draw(r *rand.Rand) uint16 {
	u := r.Float64()
	i := sort.SearchFloat64s(v.cdf[:], u)
	return uint16(min(i, vocabSize-1))
}

// image generates one picture: a gradient from a random base colour, a
// rectangle of another colour and cheap per-pixel noise.
func (it *synthIter) image(r *rand.Rand) (tensor.Tensor, error) {
	o := it.o
	w, h, c := o.Width, o.Height, o.Channels
	pix := make([]byte, w*h*c)
	var base, rect [4]int
	for k := range base {
		base[k], rect[k] = r.IntN(256), r.IntN(256)
	}
	gx, gy := r.IntN(512)-256, r.IntN(512)-256
	x0, y0 := r.IntN(w), r.IntN(h)
	x1, y1 := x0+1+r.IntN(w-x0), y0+1+r.IntN(h-y0)
	noise := r.Uint32() | 1
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			inRect := x >= x0 && x < x1 && y >= y0 && y < y1
			noise ^= noise << 13
			noise ^= noise >> 17
			noise ^= noise << 5
			p := pix[(y*w+x)*c:]
			for k := 0; k < c; k++ {
				v := base[k] + (gx*x/w+gy*y/h)/2
				if inRect {
					v = rect[k]
				}
				if k == 3 {
					v = 255 // opaque alpha, so PNG round-trips exactly
				} else {
					v += int(noise>>(8*k))&15 - 8
				}
				p[k] = byte(max(0, min(255, v)))
			}
		}
	}
	if o.Encoding == "raw" {
		return tensor.Tensor{Name: "image", DType: tensor.Uint8, Shape: []int64{int64(h), int64(w), int64(c)}, Data: pix}, nil
	}
	var img image.Image
	rect0 := image.Rect(0, 0, w, h)
	switch c {
	case 1:
		img = &image.Gray{Pix: pix, Stride: w, Rect: rect0}
	case 3:
		rgba := image.NewRGBA(rect0)
		for i, j := 0, 0; i < len(pix); i, j = i+3, j+4 {
			rgba.Pix[j], rgba.Pix[j+1], rgba.Pix[j+2], rgba.Pix[j+3] = pix[i], pix[i+1], pix[i+2], 255
		}
		img = rgba
	default:
		img = &image.NRGBA{Pix: pix, Stride: 4 * w, Rect: rect0}
	}
	var buf bytes.Buffer
	var err error
	if o.Encoding == "png" {
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img)
	} else {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	}
	if err != nil {
		return tensor.Tensor{}, err
	}
	return tensor.BytesScalar("image", buf.Bytes()), nil
}
