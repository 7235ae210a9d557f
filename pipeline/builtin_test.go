package pipeline

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
)

// The issue's example spec, end to end with the built-in functions.
func TestIssueExampleSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "corpus"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f := 0; f < 3; f++ {
		var b strings.Builder
		for i := 0; i < 200; i++ {
			n := 1 + (i*7+f)%300
			if i%50 == 0 {
				n = 0 // empty line: filtered out
			}
			for w := 0; w < n; w++ {
				fmt.Fprintf(&b, "w%d ", (w*13+i)%97)
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "corpus", fmt.Sprintf("%d.txt", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte(`
source:
  files: {paths: ["corpus/*.txt"], format: lines}
ops:
  - map: {fn: tokenize_whitespace, args: {vocab_size: 32000}, parallelism: 4}
  - filter: {fn: length_between, args: {tensor: tokens, min: 1, max: 512}}
  - shuffle: {buffer: 4096, seed: 7}
  - bucket_by_sequence_length: {tensor: tokens, boundaries: [32, 64, 128, 256], batch_sizes: [128, 64, 32, 16, 8], pad_value: 0}
  - prefetch: {buffer: 8}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := LoadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	els := run(t, spec)
	rows := int64(0)
	for _, e := range els {
		tok, ok := e.Get("tokens")
		if !ok || tok.DType.String() != "int32" || len(tok.Shape) != 2 {
			t.Fatalf("batch tokens %+v", tok)
		}
		lens, _ := int32s(t, e, "tokens_length")
		for _, l := range lens {
			if l < 1 || int64(l) > tok.Shape[1] {
				t.Fatalf("length %d in a batch padded to %d", l, tok.Shape[1])
			}
		}
		rows += tok.Shape[0]
	}
	if rows != 600-12 {
		t.Fatalf("%d rows, want 588 (600 lines minus 12 empty)", rows)
	}
	if a, b := encodeAll(t, els), encodeAll(t, run(t, spec)); !bytes.Equal(a, b) {
		t.Fatal("two runs differ")
	}
}

func TestImagePipeline(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 5; i++ {
		img := image.NewRGBA(image.Rect(0, 0, 40+i, 30))
		for y := 0; y < 30; y++ {
			for x := 0; x < 40+i; x++ {
				img.Set(x, y, color.RGBA{uint8(x * 5), uint8(y * 7), uint8(i * 40), 255})
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.png", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := NewSpec(FromFiles("whole_file", filepath.Join(dir, "*.png"))).
		Map("decode_image", fn.Args{"tensor": "data", "output": "image"}, 2).
		Map("resize", fn.Args{"height": 24, "width": 24}, 1).
		Map("random_crop", fn.Args{"height": 16, "width": 16}, 1).
		Batch(2, false)
	els := run(t, spec)
	if len(els) != 3 {
		t.Fatalf("%d batches, want 3", len(els))
	}
	img, _ := els[0].Get("image")
	if img.DType.String() != "uint8" || !slices.Equal(img.Shape, []int64{2, 16, 16, 3}) {
		t.Fatalf("image batch %s%v", img.DType, img.Shape)
	}
	if last, _ := els[2].Get("image"); last.Shape[0] != 1 {
		t.Fatalf("remainder batch of %d", last.Shape[0])
	}
	if !bytes.Equal(encodeAll(t, els), encodeAll(t, run(t, spec))) {
		t.Fatal("random_crop not reproducible")
	}
}

func TestBadInputErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(p, []byte("{\"x\": 1}\n{\"x\": oops}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Source: Source{Files: &FilesSource{Paths: []string{p}, Format: "jsonl", Fields: []Field{{Name: "x", DType: "int64"}}}}}
	_, err := runErr(spec)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Fatalf("malformed JSON line: %v", err)
	}
}
