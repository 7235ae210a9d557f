package pipeline

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebDatasetSpec: a spec reading the shard Python's tarfile wrote,
// through a map, with the source's skipped count in the statistics.
func TestWebDatasetSpec(t *testing.T) {
	dir := t.TempDir()
	shard, err := os.ReadFile("formats/testdata/webdataset/shard-000000.tar")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "shard-000000.tar"), shard, 0o644)
	os.WriteFile(filepath.Join(dir, "shard-000001.tar"), shard[:1500], 0o644) // truncated
	spec := "source:\n  files: {paths: [\"shard-*.tar\"], format: webdataset, skip_corrupt: true}\nops:\n  - prefetch: {buffer: 2}\n"
	specPath := filepath.Join(dir, "spec.yaml")
	os.WriteFile(specPath, []byte(spec), 0o644)
	s, err := LoadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunLocal(t.Context(), s, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Shard 0's six samples; shard 1 breaks inside its first sample's
	// second header, which is skipped and counted.
	if res.Elements != 6 || res.Ops[0].Skipped != 1 {
		t.Fatalf("%d elements, %d skipped; want 6 and 1", res.Elements, res.Ops[0].Skipped)
	}
	s.Source.Files.SkipCorrupt = false
	if _, err := RunLocal(t.Context(), s, RunOptions{}); err == nil || !strings.Contains(err.Error(), "shard-000001.tar: offset 1024: truncated tar") {
		t.Fatalf("without skip_corrupt: %v", err)
	}
}

func TestImageFolderSpec(t *testing.T) {
	root := t.TempDir()
	for i, class := range []string{"zebra", "ant", "mole"} {
		os.MkdirAll(filepath.Join(root, class), 0o755)
		for j := 0; j < 3; j++ {
			img := image.NewRGBA(image.Rect(0, 0, 4+j, 3))
			img.Set(0, 0, color.RGBA{uint8(i), uint8(j), 0, 255})
			var buf bytes.Buffer
			png.Encode(&buf, img)
			os.WriteFile(filepath.Join(root, class, string(rune('a'+j))+".png"), buf.Bytes(), 0o644)
		}
	}
	spec := NewSpec(Source{Files: &FilesSource{Paths: []string{root}, Format: "image_folder"}}).
		Then(Op{Map: &MapOp{Fn: "decode_image"}}).
		Then(Op{Map: &MapOp{Fn: "resize", Args: map[string]any{"height": 3, "width": 4}}})
	els := run(t, spec)
	if len(els) != 9 {
		t.Fatalf("%d elements, want 9", len(els))
	}
	for k, e := range els {
		lab, _ := e.Get("label")
		v, _ := lab.Int64Value()
		// ant 0, mole 1, zebra 2; three images each, in order.
		if v != int64(k/3) {
			t.Fatalf("element %d: label %d, want %d", k, v, k/3)
		}
		im, _ := e.Get("image")
		if len(im.Shape) != 3 || im.Shape[0] != 3 || im.Shape[1] != 4 || im.Shape[2] != 3 {
			t.Fatalf("element %d: image shape %v", k, im.Shape)
		}
	}
}
