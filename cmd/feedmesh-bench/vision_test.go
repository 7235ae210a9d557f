package main

import (
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeNoiseFolder makes root/<class>/<i>.jpg: classes × per JPEGs of
// random pixels.
func writeNoiseFolder(t *testing.T, classes, per int) string {
	t.Helper()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	for c := range classes {
		dir := filepath.Join(root, string(rune('a'+c)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range per {
			img := image.NewRGBA(image.Rect(0, 0, 64, 48))
			for y := range 48 {
				for x := range 64 {
					img.Set(x, y, color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255})
				}
			}
			f, err := os.Create(filepath.Join(dir, string(rune('0'+i))+".jpg"))
			if err != nil {
				t.Fatal(err)
			}
			if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	return root
}

// TestVisionNodeReadsMoreThanTheFolder: train-node and train-node-cut
// asked for more images than the folder holds read them (the job's epochs
// repeat the folder). They failed with "EOF": the spec's repeat read one
// pass under sharding dynamic, and the job ended there.
func TestVisionNodeReadsMoreThanTheFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	folder := writeNoiseFolder(t, 2, 5) // 10 images
	if n, err := visionFolderImages(visionCfg{folder: folder}); err != nil || n != 10 {
		t.Fatalf("the folder's images: %d, %v; want 10", n, err)
	}
	for _, way := range []string{vTrainFMNode, vTrainNodeCut} {
		out, errOut, code := runCmd(t, "vision", visionChildArg, way, folder, "100", "32", "8", "float32")
		if code != 0 {
			t.Fatalf("%s, 100 images of a folder of 10: exit %d: %s", way, code, strings.TrimSpace(errOut))
		}
		var res visionResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil || res.Images < 100 {
			t.Fatalf("%s: result %q (%v), want at least 100 images", way, out, err)
		}
	}
}
