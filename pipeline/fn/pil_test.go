package fn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

// The vision ops against PIL and torchvision's transforms on the same
// images: decode (Image.open().convert), resize (Image.resize), the
// crop+resize of RandomResizedCrop (Image.crop().resize()), flip and
// ToTensor+Normalize. Skipped when Debian's python3 has no PIL (a failure
// under FEEDMESH_REQUIRE_PYTHON=1, as CI sets).

// pilPython returns an interpreter with PIL and numpy, or skips.
func pilPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("FEEDMESH_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	out, err := exec.Command(py, "-c", "import PIL.Image, numpy").CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("%s has no PIL and numpy (install python3-pil python3-numpy): %v: %s", py, err, bytes.TrimSpace(out))
		if os.Getenv("FEEDMESH_REQUIRE_PYTHON") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

const pilScript = `
import json, sys
import numpy as np
from PIL import Image
jobs = json.load(open(sys.argv[1]))
out = sys.argv[2]
filters = {"bilinear": Image.BILINEAR, "area": Image.BOX, "bicubic": Image.BICUBIC}
for j in jobs:
    im = Image.open(j["file"])
    im = im.convert("L" if j.get("gray") else "RGB")
    op = j["op"]
    if op == "decode":
        a = np.asarray(im)
    elif op == "resize":
        x, y, w, h = j["crop"]
        if [x, y, w, h] != [0, 0] + list(im.size):
            im = im.crop((x, y, x + w, y + h))
        a = np.asarray(im.resize((j["width"], j["height"]), filters[j["interp"]]))
    elif op == "flip":
        a = np.asarray(im.transpose(Image.FLIP_LEFT_RIGHT))
    elif op == "normalize":
        # torchvision: ToTensor (/255, CHW) then Normalize((x - mean) / std), in float32
        a = np.asarray(im).astype(np.float32) / np.float32(255)
        a = a.transpose(2, 0, 1)
        m = np.array(j["mean"], dtype=np.float32)[:, None, None]
        s = np.array(j["std"], dtype=np.float32)[:, None, None]
        a = ((a - m) / s).astype(np.float32)
    open(out + "/" + str(j["id"]) + ".raw", "wb").write(np.ascontiguousarray(a).tobytes())
`

// photoLike draws a w × h image with a photograph's mix of smooth shading,
// texture and edges: value noise at several scales per channel, plus
// rectangles and disks with hard edges.
func photoLike(w, h int, seed uint64) *image.RGBA {
	r := rand.New(rand.NewPCG(seed, 1))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	type grid struct {
		n int
		v []float64
	}
	var octaves [3][]grid
	for c := range octaves {
		for _, n := range []int{3, 9, 27, 81} {
			g := grid{n: n, v: make([]float64, (n+1)*(n+1))}
			for i := range g.v {
				g.v[i] = r.Float64()
			}
			octaves[c] = append(octaves[c], g)
		}
	}
	noise := func(g grid, fx, fy float64) float64 {
		x, y := fx*float64(g.n), fy*float64(g.n)
		x0, y0 := int(x), int(y)
		tx, ty := x-float64(x0), y-float64(y0)
		at := func(i, j int) float64 { return g.v[min(j, g.n)*(g.n+1)+min(i, g.n)] }
		return (at(x0, y0)*(1-tx)+at(x0+1, y0)*tx)*(1-ty) + (at(x0, y0+1)*(1-tx)+at(x0+1, y0+1)*tx)*ty
	}
	type shape struct {
		x0, y0, x1, y1 int
		disk           bool
		col            [3]float64
	}
	var shapes []shape
	for range 12 {
		x0, y0 := r.IntN(w), r.IntN(h)
		s := shape{x0: x0, y0: y0, x1: x0 + 10 + r.IntN(w/3), y1: y0 + 10 + r.IntN(h/3), disk: r.IntN(2) == 0}
		for c := range s.col {
			s.col[c] = r.Float64() * 255
		}
		shapes = append(shapes, s)
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var px [3]float64
			for c := range px {
				amp := 160.0
				for _, g := range octaves[c] {
					px[c] += amp * (noise(g, float64(x)/float64(w), float64(y)/float64(h)) - 0.5)
					amp /= 2
				}
				px[c] += 128
			}
			for _, s := range shapes {
				in := x >= s.x0 && x < s.x1 && y >= s.y0 && y < s.y1
				if s.disk {
					cx, cy, rx, ry := float64(s.x0+s.x1)/2, float64(s.y0+s.y1)/2, float64(s.x1-s.x0)/2, float64(s.y1-s.y0)/2
					dx, dy := (float64(x)-cx)/rx, (float64(y)-cy)/ry
					in = dx*dx+dy*dy <= 1
				}
				if in {
					for c := range px {
						px[c] = 0.3*px[c] + 0.7*s.col[c]
					}
				}
			}
			img.SetRGBA(x, y, color.RGBA{clamp8(px[0]), clamp8(px[1]), clamp8(px[2]), 255})
		}
	}
	return img
}

func clamp8(v float64) uint8 { return uint8(max(0, min(255, math.Round(v)))) }

// pilCase is one comparison: a job for the Python side and the Go side's
// output.
type pilCase struct {
	job  map[string]any
	name string
	got  []byte // uint8, or float32 little-endian for normalize
	// tolerances: mean absolute difference and largest difference allowed
	maxMAD, maxDiff float64
	float           bool
}

func TestVisionOpsMatchPIL(t *testing.T) {
	py := pilPython(t)
	dir := t.TempDir()
	// The images: photo-like JPEGs at q90 (4:2:0) of a typical dataset
	// size, a gray JPEG, a PNG, and the scikit-learn sample photographs
	// when Debian's python3-sklearn is installed.
	files := map[string][]byte{}
	for i, sz := range [][2]int{{500, 375}, {375, 500}, {640, 480}} {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photoLike(sz[0], sz[1], uint64(i)), &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("synthetic-%d.jpg", i)] = buf.Bytes()
	}
	var buf bytes.Buffer
	src := photoLike(320, 240, 9)
	gray := image.NewGray(src.Bounds())
	for i := range gray.Pix {
		gray.Pix[i] = src.Pix[4*i+1]
	}
	jpeg.Encode(&buf, gray, &jpeg.Options{Quality: 90})
	files["gray.jpg"] = bytes.Clone(buf.Bytes())
	buf.Reset()
	png.Encode(&buf, src)
	files["photo.png"] = bytes.Clone(buf.Bytes())
	if photos, _ := filepath.Glob("/usr/lib/python3/dist-packages/sklearn/datasets/images/*.jpg"); len(photos) > 0 {
		for _, p := range photos {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files["sklearn-"+filepath.Base(p)] = b
		}
	} else {
		t.Log("no scikit-learn sample photographs (python3-sklearn): synthetic images only")
	}
	_, fast := JPEGDecoder()
	var cases []*pilCase
	add := func(c *pilCase) { c.job["id"] = len(cases); cases = append(cases, c) }
	rng := rand.New(rand.NewPCG(39, 39))
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		isGray := strings.HasPrefix(name, "gray")
		ch := 3
		if isGray {
			ch = 1
		}
		dec, err := mustMap(t, "decode_image", Args{"channels": ch})(&FnContext{}, elem(tensor.BytesScalar("image", data)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		img, _ := dec.Get("image")
		h, w := int(img.Shape[0]), int(img.Shape[1])
		job := func(op string, kv ...any) map[string]any {
			m := map[string]any{"file": p, "op": op, "gray": isGray}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		}
		// Decoding: the same library with the same settings is exact; the
		// pure-Go decoder (no chroma smoothing) is within a few levels.
		decMAD, decMax := 0.0, 0.0
		if !fast || !strings.HasSuffix(name, ".jpg") {
			decMAD, decMax = 3, 80
		}
		if strings.HasSuffix(name, ".png") {
			decMAD, decMax = 0, 0
		}
		add(&pilCase{job: job("decode"), name: name + " decode", got: img.Data, maxMAD: decMAD, maxDiff: decMax})
		// Resizing the decoded image: the same arithmetic as PIL's,
		// compared on PIL's decode: within 1–2 levels at most (usually exact).
		for _, sz := range [][2]int{{224, 224}, {113, 150}, {800, 600}} {
			for _, f := range []string{"bilinear", "area", "bicubic"} {
				out, err := mustMap(t, "resize", Args{"height": sz[0], "width": sz[1], "interpolation": f})(&FnContext{}, dec)
				if err != nil {
					t.Fatal(err)
				}
				add(&pilCase{job: job("resize", "crop", []int{0, 0, w, h}, "height", sz[0], "width", sz[1], "interp", f),
					name: fmt.Sprintf("%s resize %dx%d %s", name, sz[1], sz[0], f), got: out.Tensors[0].Data, maxMAD: decMAD + 0.01, maxDiff: max(decMax, 2)})
			}
		}
		// random_resized_crop: the window it draws, cropped and resized by PIL.
		rrc := mustMap(t, "random_resized_crop", Args{"height": 224, "width": 224})
		ca, _ := parseCropArgs("random_resized_crop", Args{"height": 224, "width": 224})
		for range 4 {
			ctx := &FnContext{Seed: rng.Uint64(), Index: rng.Int64N(1000)}
			win := ca.window(ctx.Rand(), w, h)
			out, err := rrc(ctx, dec)
			if err != nil {
				t.Fatal(err)
			}
			crop := []int{win.x, win.y, win.w, win.h}
			add(&pilCase{job: job("resize", "crop", crop, "height", 224, "width", 224, "interp", "bilinear"),
				name: fmt.Sprintf("%s random_resized_crop %v", name, crop), got: out.Tensors[0].Data, maxMAD: decMAD + 0.01, maxDiff: max(decMax, 2)})
			// decode_and_crop: the same window, decoded at a DCT scale
			// when it is at least twice the output: close to PIL's
			// full-size decode, crop and resize, not equal.
			fused, err := mustMap(t, "decode_and_crop", Args{"height": 224, "width": 224, "channels": ch})(ctx, elem(tensor.BytesScalar("image", data)))
			if err != nil {
				t.Fatal(err)
			}
			add(&pilCase{job: job("resize", "crop", crop, "height", 224, "width", 224, "interp", "bilinear"),
				name: fmt.Sprintf("%s decode_and_crop %v (DCT 1/%d)", name, crop, dctDenom(win.w, win.h, 224, 224)), got: fused.Tensors[0].Data, maxMAD: max(decMAD, 1.5), maxDiff: 255})
		}
		flipped := flip(img, h, w, ch, true, false)
		add(&pilCase{job: job("flip"), name: name + " flip", got: flipped.Data, maxMAD: decMAD, maxDiff: decMax})
		if !isGray {
			mean, std := []any{0.485, 0.456, 0.406}, []any{0.229, 0.224, 0.225}
			out, err := mustMap(t, "normalize", Args{"scale": 1.0 / 255, "mean": mean, "std": std, "layout": "chw"})(&FnContext{}, dec)
			if err != nil {
				t.Fatal(err)
			}
			add(&pilCase{job: job("normalize", "mean", mean, "std", std), name: name + " normalize chw", got: out.Tensors[0].Data, float: true, maxMAD: decMAD/255/0.22 + 1e-6, maxDiff: max(decMax/255/0.22, 2e-6)})
		}
	}
	jobs := make([]map[string]any, len(cases))
	for i, c := range cases {
		jobs[i] = c.job
	}
	jb, _ := json.Marshal(jobs)
	jobsPath := filepath.Join(dir, "jobs.json")
	os.WriteFile(jobsPath, jb, 0o644)
	scriptPath := filepath.Join(dir, "pil.py")
	os.WriteFile(scriptPath, []byte(pilScript), 0o644)
	if out, err := exec.Command(py, scriptPath, jobsPath, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", scriptPath, err, out)
	}
	for i, c := range cases {
		want, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.raw", i)))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(c.got) {
			t.Errorf("%s: %d bytes, PIL's %d", c.name, len(c.got), len(want))
			continue
		}
		var sum, worst float64
		n := len(want)
		if c.float {
			n /= 4
			g, _ := (&tensor.Tensor{DType: tensor.Float32, Shape: []int64{int64(n)}, Data: c.got}).Float32s()
			wv, _ := (&tensor.Tensor{DType: tensor.Float32, Shape: []int64{int64(n)}, Data: want}).Float32s()
			for k := range g {
				d := math.Abs(float64(g[k]) - float64(wv[k]))
				sum += d
				worst = max(worst, d)
			}
		} else {
			for k := range want {
				d := math.Abs(float64(c.got[k]) - float64(want[k]))
				sum += d
				worst = max(worst, d)
			}
		}
		mad := sum / float64(n)
		t.Logf("%-60s mean |diff| %.4f, max %g", c.name, mad, worst)
		if mad > c.maxMAD || worst > c.maxDiff {
			t.Errorf("%s: mean |diff| %.4f (allowed %g), max %g (allowed %g) against PIL", c.name, mad, c.maxMAD, worst, c.maxDiff)
		}
	}
}
