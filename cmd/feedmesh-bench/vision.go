package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/feedmesh/feedmesh/bench/transportbench"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

func init() {
	registerBench(cli.Command{Name: "vision", Summary: "images/s and CPU-s per 1,000 images of a vision pipeline on real photographs: feedmesh run-local (1 core, all cores), a node serving a client, PIL and a torch DataLoader", Run: benchVision})
}

//go:embed vision_dataloader.py
var visionPy []byte

// The ways the vision benchmark measures, each in a process of its own.
const (
	vDecodePIL     = "decode-pil"         // PIL: Image.open().convert("RGB"), np.asarray (pinned to one core)
	vDecodeFM      = "decode-feedmesh"    // run-local: image_folder → decode_image, parallelism 1 (pinned to one core)
	vTrainDL0      = "train-dataloader-0" // torch DataLoader, num_workers 0, PIL transforms (pinned to one core)
	vTrainFM1      = "train-feedmesh-1"   // run-local: decode_and_crop → normalize (random_flip fused) → batch, parallelism 1 (pinned to one core)
	vTrainDL2      = "train-dataloader-2" // torch DataLoader, num_workers 2 (all cores)
	vTrainFMAll    = "train-feedmesh-all" // run-local, parallelism = cores (all cores)
	vTrainFMNode   = "train-node"         // one in-process node runs the job, a client reads it over loopback (all cores)
	vTrainNodeCut  = "train-node-cut"     // train-node with the job cut after decode_and_crop: the node ships uint8 crops, the client flips, normalizes and batches (all cores)
	visionChildArg = "--child"
	// visionProfileEnv names the file a child writes its measured pass's CPU profile to (--cpuprofile).
	visionProfileEnv = "FEEDMESH_BENCH_VISION_CPUPROFILE"
)

var visionWays = []string{vDecodePIL, vDecodeFM, vTrainDL0, vTrainFM1, vTrainDL2, vTrainFMAll, vTrainFMNode, vTrainNodeCut}

// visionPinned are the per-core ways: run under `taskset -c 0`.
var visionPinned = map[string]bool{vDecodePIL: true, vDecodeFM: true, vTrainDL0: true, vTrainFM1: true}

// visionBaseline is what each way's ratio is taken against (within a run).
var visionBaseline = map[string]string{vDecodeFM: vDecodePIL, vTrainFM1: vTrainDL0, vTrainFMAll: vTrainDL2, vTrainFMNode: vTrainFMAll, vTrainNodeCut: vTrainFMAll}

// visionResult is one measured pass (a child's JSON line).
type visionResult struct {
	Images     int64   `json:"images"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_s"`
	Bounding   string  `json:"bounding_op,omitempty"`
}

func (r visionResult) perS() float64 { return float64(r.Images) / r.Seconds }

// visionCfg is what every way needs.
type visionCfg struct {
	folder       string
	images, size int
	batch        int
	dtype        string // normalize's output: float32 or bfloat16
}

func benchVision(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == visionChildArg {
		return visionChild(ctx, args[1:], stdout)
	}
	fs := prog.NewFlagSet("vision", "[--folder DIR] [--images N] [--runs N] [--ways LIST] [--json]", stderr)
	folder := fs.String("folder", "", "an image folder (root/<class>/<image>.jpg); default: one made by scripts/make-photo-folder.py in a temporary directory")
	perClass := fs.Int("per-class", 500, "images per class of the folder made when --folder is not given")
	images := fs.Int("images", 1000, "images per measured pass (the folder read from the start again when it runs out)")
	runs := fs.Int("runs", 5, "runs; each measures every way once, in an order rotated from run to run; medians are reported")
	size := fs.Int("size", 224, "the output's height and width")
	batch := fs.Int("batch", 32, "batch size of the train ways")
	dtype := fs.String("dtype", "float32", "the feedmesh train ways' normalize output: float32 (what ToTensor+Normalize give the DataLoader) or bfloat16 (half the bytes a node sends its client)")
	waysFlag := fs.String("ways", joinList(visionWays), "ways to measure")
	python := fs.String("python", pyDefault(), "the Python interpreter with PIL, numpy, torch and torchvision (Debian's python3-pil, python3-torchvision)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of each feedmesh way's measured pass to PREFIX-<way>-<run>.pprof")
	pin := fs.Bool("pin", true, "run the per-core ways (decode-*, train-dataloader-0, train-feedmesh-1) under taskset -c 0")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: way, cores (1: pinned, else all), images_per_s (median), cpu_s_per_1000 (median CPU-s of the process and its workers per 1,000 images), ratio (median over runs of images/s ÷ the baseline's in the same run), ratio_vs (the baseline), cpu_ratio (likewise, of the baseline's CPU-s per image ÷ this one's: per-core efficiency), bounding_op (feedmesh run-local: the op its statistics name bounding)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: feedmesh-bench vision [flags]

The input pipeline of an ImageNet-style training job on real photographs, seven ways, each in a
process of its own (this binary in a hidden mode, or --python running the embedded
vision_dataloader.py), every run measuring each once, in an order rotated from run to run:

  decode-pil          PIL: Image.open(f).convert("RGB"), np.asarray                 1 core
  decode-feedmesh     run-local: image_folder → decode_image, parallelism 1         1 core
  train-dataloader-0  torch DataLoader (num_workers 0) over torchvision ImageFolder with
                      RandomResizedCrop(size), RandomHorizontalFlip, ToTensor, Normalize  1 core
  train-feedmesh-1    run-local: image_folder → decode_and_crop(size) → normalize(ImageNet
                      mean/std, chw, --dtype, random_flip) → batch, parallelism 1      1 core
  train-dataloader-2  the DataLoader with num_workers 2                               all cores
  train-feedmesh-all  train-feedmesh-1 with the maps at parallelism = cores           all cores
  train-node          one in-process node runs train-feedmesh-all's spec as a job; a client
                      in the same process reads its batches over loopback               all cores
  train-node-cut      train-node with the job cut after decode_and_crop (offload_boundary):
                      the node ships each uint8 crop, the client normalizes and batches all cores

Each way reads --images images after a warm-up of 64. Ratios are taken within a run:
decode-feedmesh ÷ decode-pil, train-feedmesh-1 ÷ train-dataloader-0, train-feedmesh-all ÷
train-dataloader-2, train-node and train-node-cut ÷ train-feedmesh-all. Without --folder the folder is made by
scripts/make-photo-folder.py (python3-pil, python3-sklearn; found from the working directory).
The Python ways are skipped when the interpreter lacks PIL or torchvision. Progress goes to stderr.

Flags:`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var ways []string
	for _, w := range cli.SplitList(*waysFlag) {
		if !slices.Contains(visionWays, w) {
			return fmt.Errorf("--ways: %q is not one of %s", w, joinList(visionWays))
		}
		if !slices.Contains(ways, w) {
			ways = append(ways, w)
		}
	}
	switch {
	case len(ways) == 0:
		return errors.New("--ways: none given")
	case *runs < 1 || *runs > 100:
		return fmt.Errorf("--runs: %d is not in [1, 100]", *runs)
	case *images < 64 || *images > 10_000_000:
		return fmt.Errorf("--images: %d is not in [64, 10^7]", *images)
	case *size < 1 || *size > 4096:
		return fmt.Errorf("--size: %d is not in [1, 4096]", *size)
	case *batch < 1 || *batch > 4096:
		return fmt.Errorf("--batch: %d is not in [1, 4096]", *batch)
	case *dtype != "float32" && *dtype != "bfloat16":
		return fmt.Errorf("--dtype: %q is not float32 or bfloat16", *dtype)
	case *perClass < 1 || *perClass > 100_000:
		return fmt.Errorf("--per-class: %d is not in [1, 10^5]", *perClass)
	}
	dir, err := os.MkdirTemp("", "feedmesh-bench-vision-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pyPath := filepath.Join(dir, "vision_dataloader.py")
	if err := os.WriteFile(pyPath, visionPy, 0o644); err != nil {
		return err
	}
	hasPy := pyCheckImport(ctx, *python, "PIL, numpy, torch, torchvision") == ""
	if *folder == "" {
		repo, err := findRepo()
		if err != nil {
			return fmt.Errorf("no --folder, and no checkout to find scripts/make-photo-folder.py in: %w", err)
		}
		*folder = filepath.Join(dir, "photos")
		fmt.Fprintf(stderr, "making %d photographs per class in %s …\n", *perClass, *folder)
		cmd := exec.CommandContext(ctx, *python, filepath.Join(repo, "scripts", "make-photo-folder.py"), *folder, "--per-class", strconv.Itoa(*perClass))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("scripts/make-photo-folder.py: %v: %s", err, bytes.TrimSpace(out))
		}
	}
	if !hasPy {
		fmt.Fprintf(stderr, "vision: %s lacks PIL, numpy, torch or torchvision: the PIL and DataLoader ways are skipped (install python3-pil python3-torchvision)\n", *python)
		ways = slices.DeleteFunc(ways, func(w string) bool { return w == vDecodePIL || w == vTrainDL0 || w == vTrainDL2 })
	}
	taskset, _ := exec.LookPath("taskset")
	if *pin && taskset == "" {
		fmt.Fprintln(stderr, "vision: no taskset (util-linux): the per-core ways run unpinned")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := visionCfg{folder: *folder, images: *images, size: *size, batch: *batch, dtype: *dtype}
	desc, _ := fn.JPEGDecoder()
	fmt.Fprintf(stderr, "vision: %s, %d images per pass, %d cores; JPEG decoder: %s\n", *folder, *images, runtime.NumCPU(), desc)
	results := map[string][]visionResult{}
	ratios := map[string][]float64{}
	cpuRatios := map[string][]float64{}
	for r := 0; r < *runs; r++ {
		got := map[string]visionResult{}
		for k := range ways {
			w := ways[(k+r)%len(ways)]
			var cmd *exec.Cmd
			if isPyWay(w) {
				pyArgs := []string{pyPath, "decode", cfg.folder, strconv.Itoa(cfg.images)}
				if w != vDecodePIL {
					workers := "0"
					if w == vTrainDL2 {
						workers = "2"
					}
					pyArgs = []string{pyPath, "train", cfg.folder, strconv.Itoa(cfg.images), strconv.Itoa(cfg.size), strconv.Itoa(cfg.batch), workers}
				}
				cmd = exec.CommandContext(ctx, *python, pyArgs...)
			} else {
				cmd = exec.CommandContext(ctx, exe, "vision", visionChildArg, w, cfg.folder, strconv.Itoa(cfg.images), strconv.Itoa(cfg.size), strconv.Itoa(cfg.batch), cfg.dtype)
			}
			if *pin && taskset != "" && visionPinned[w] {
				cmd = exec.CommandContext(ctx, taskset, append([]string{"-c", "0"}, cmd.Args...)...)
			}
			if *cpuProfile != "" && !isPyWay(w) {
				cmd.Env = append(os.Environ(), visionProfileEnv+"="+fmt.Sprintf("%s-%s-%d.pprof", *cpuProfile, w, r+1))
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v: %s", w, err, bytes.TrimSpace(errb.Bytes()))
			}
			var res visionResult
			lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
			if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil || res.Seconds <= 0 {
				return fmt.Errorf("%s: no result in %q (%v): %s", w, out.String(), err, bytes.TrimSpace(errb.Bytes()))
			}
			fmt.Fprintf(stderr, "run %d: %-19s %7.1f images/s, %6.2f CPU-s/1000 images %s\n", r+1, w, res.perS(), res.CPUSeconds/float64(res.Images)*1000, res.Bounding)
			got[w] = res
			results[w] = append(results[w], res)
		}
		for w, b := range visionBaseline {
			x, ok1 := got[w]
			y, ok2 := got[b]
			if ok1 && ok2 {
				ratios[w] = append(ratios[w], x.perS()/y.perS())
				cpuRatios[w] = append(cpuRatios[w], (y.CPUSeconds/float64(y.Images))/(x.CPUSeconds/float64(x.Images)))
			}
		}
	}
	var rows []benchRow
	for _, w := range visionWays {
		rs, ok := results[w]
		if !ok {
			continue
		}
		var ps, cpu []float64
		bounding := map[string]int{}
		for _, r := range rs {
			ps = append(ps, r.perS())
			cpu = append(cpu, r.CPUSeconds/float64(r.Images)*1000)
			if r.Bounding != "" {
				bounding[r.Bounding]++
			}
		}
		cores := runtime.NumCPU()
		if visionPinned[w] && *pin && taskset != "" {
			cores = 1
		}
		row := benchRow{"way": w, "cores": cores, "images_per_s": median(ps), "cpu_s_per_1000": median(cpu)}
		if b, ok := visionBaseline[w]; ok && len(ratios[w]) > 0 {
			row["ratio"], row["ratio_vs"], row["cpu_ratio"] = median(ratios[w]), b, median(cpuRatios[w])
		}
		if len(bounding) > 0 {
			best := ""
			for op, n := range bounding {
				if best == "" || n > bounding[best] || (n == bounding[best] && op < best) {
					best = op
				}
			}
			row["bounding_op"] = best
		}
		rows = append(rows, row)
	}
	return printRows(stdout, *jsonOut, []string{"way", "cores", "images_per_s", "cpu_s_per_1000", "ratio", "ratio_vs", "cpu_ratio", "bounding_op"}, rows)
}

func isPyWay(w string) bool { return w == vDecodePIL || w == vTrainDL0 || w == vTrainDL2 }

func joinList(xs []string) string {
	var b bytes.Buffer
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(x)
	}
	return b.String()
}

func pyDefault() string {
	if p := os.Getenv("FEEDMESH_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// imagenetMean and imagenetStd are torchvision's ImageNet normalization.
var (
	imagenetMean = []any{0.485, 0.456, 0.406}
	imagenetStd  = []any{0.229, 0.224, 0.225}
)

// visionSpec is a way's pipeline over cfg.folder: n images (the folder
// repeated as needed), decoded only (decode) or the training transforms,
// batched. n 0: one pass, unrepeated (a node's job, whose epochs repeat
// it: a DYNAMIC job refuses repeat).
func visionSpec(cfg visionCfg, decodeOnly bool, parallelism, n int) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.FromFiles("image_folder", cfg.folder))
	if n > 0 {
		s.RepeatForever().Take(int64(n))
	}
	if decodeOnly {
		return s.Map("decode_image", fn.Args{"channels": 3}, parallelism)
	}
	s.Map("decode_and_crop", fn.Args{"height": cfg.size, "width": cfg.size, "channels": 3}, parallelism)
	// RandomHorizontalFlip fused into normalize (its random_flip).
	s.Map("normalize", fn.Args{"scale": 1.0 / 255, "mean": imagenetMean, "std": imagenetStd, "layout": "chw", "dtype": cfg.dtype, "random_flip": true}, parallelism)
	return s.Batch(int64(cfg.batch), false)
}

// visionChild measures one feedmesh way in this process: WAY FOLDER
// IMAGES SIZE BATCH DTYPE.
func visionChild(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 6 {
		return errors.New("vision --child WAY FOLDER IMAGES SIZE BATCH DTYPE")
	}
	var cfg visionCfg
	var err error
	cfg.folder, cfg.dtype = args[1], args[5]
	for i, p := range []*int{&cfg.images, &cfg.size, &cfg.batch} {
		if *p, err = strconv.Atoi(args[2+i]); err != nil {
			return err
		}
	}
	way := args[0]
	par := 1
	if way == vTrainFMAll || way == vTrainFMNode || way == vTrainNodeCut {
		par = runtime.GOMAXPROCS(0)
	}
	if way == vTrainFMNode || way == vTrainNodeCut {
		return visionNode(ctx, cfg, par, way == vTrainNodeCut, stdout)
	}
	run := func(n int) (*pipeline.RunReport, error) {
		return pipeline.RunLocal(ctx, visionSpec(cfg, way == vDecodeFM, par, n), pipeline.RunOptions{})
	}
	if _, err := run(64); err != nil {
		return err
	}
	stop, err := visionProfile()
	if err != nil {
		return err
	}
	cpu0 := transportbench.CPUSeconds()
	rep, err := run(cfg.images)
	stop()
	if err != nil {
		return err
	}
	cpu := transportbench.CPUSeconds() - cpu0
	if rep.Elements != int64(cfg.images) {
		return fmt.Errorf("read %d images, want %d", rep.Elements, cfg.images)
	}
	return cli.WriteJSON(stdout, visionResult{Images: rep.Elements, Seconds: rep.Seconds, CPUSeconds: cpu, Bounding: rep.BoundingOp})
}

// visionCut is where train-node-cut cuts visionSpec: after repeat and
// decode_and_crop (the node ships uint8 crops, a quarter of the bytes of
// float32; the client runs normalize, with the flip, and batch).
const visionCut = 2

// visionNode runs the training spec as a job of a one-node in-process
// cluster and reads it with a client over loopback; cut: with the job cut
// at visionCut.
func visionNode(ctx context.Context, cfg visionCfg, par int, cut bool, stdout io.Writer) error {
	folder, err := filepath.Abs(cfg.folder)
	if err != nil {
		return err
	}
	cfg.folder = folder // the node's data root, named absolute
	c, cleanup, err := jobsCluster(ctx, 1, withData([]string{folder}))
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	// A DYNAMIC job repeats by its epochs (its spec may not repeat, nor
	// take under exactly-once): as many passes over the folder as n
	// images need; the client stops after n.
	images, err := visionFolderImages(cfg)
	if err != nil {
		return err
	}
	read := func(name string, n int) (int64, error) {
		epochs := (int64(n) + images - 1) / images
		o := client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, GCAfter: pyGCAfter, Epochs: epochs}
		if cut {
			o.OffloadBoundary = visionCut
		}
		it, err := cl.Distribute(ctx, visionSpec(cfg, false, par, 0), o)
		if err != nil {
			return 0, err
		}
		defer it.Close()
		for it.Stats().Rows < int64(n) {
			b, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return 0, fmt.Errorf("job %q ended after %d images (%d epochs of the folder's %d), want %d", name, it.Stats().Rows, epochs, images, n)
			}
			if err != nil {
				return 0, fmt.Errorf("job %q after %d images: %w", name, it.Stats().Rows, err)
			}
			err = checkVisionBatch(b.Element, cfg, cut, b.Worker)
			b.Release()
			if err != nil {
				return 0, err
			}
		}
		return it.Stats().Rows, nil
	}
	if _, err := read("vision-warmup", 64); err != nil {
		return err
	}
	stop, err := visionProfile()
	if err != nil {
		return err
	}
	cpu0, t0 := transportbench.CPUSeconds(), time.Now()
	rows, err := read("vision", cfg.images)
	stop()
	if err != nil {
		return err
	}
	secs, cpu := time.Since(t0).Seconds(), transportbench.CPUSeconds()-cpu0
	if rows < int64(cfg.images) {
		return fmt.Errorf("the client read %d images, want %d", rows, cfg.images)
	}
	return cli.WriteJSON(stdout, visionResult{Images: rows, Seconds: secs, CPUSeconds: cpu})
}

// visionFolderImages is the number of images in cfg.folder (its splits'
// image ranges), at least 1.
func visionFolderImages(cfg visionCfg) (int64, error) {
	ss, err := pipeline.Splits(visionSpec(cfg, true, 1, 0))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", cfg.folder, err)
	}
	var n int64
	for _, s := range ss {
		n += s.End - s.Start
	}
	if n < 1 {
		return 0, fmt.Errorf("%s holds no images (root/<class>/<image>)", cfg.folder)
	}
	return n, nil
}

// visionProfile starts a CPU profile into the file visionProfileEnv names,
// if it names one; stop ends it.
func visionProfile() (stop func(), err error) {
	path := os.Getenv(visionProfileEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// checkVisionBatch checks that a batch the client read is what run-local
// makes: the normalized images, [n, 3, size, size] of the dtype, and, cut,
// made by the client (the nodes shipped its elements).
func checkVisionBatch(e tensor.Element, cfg visionCfg, cut bool, worker string) error {
	t, ok := e.Get("image")
	want := tensor.Float32
	if cfg.dtype == "bfloat16" {
		want = tensor.BFloat16
	}
	if !ok || t.DType != want || len(t.Shape) != 4 || t.Shape[0] < 1 || t.Shape[0] > int64(cfg.batch) ||
		t.Shape[1] != 3 || t.Shape[2] != int64(cfg.size) || t.Shape[3] != int64(cfg.size) {
		var names []string
		for _, x := range e.Tensors {
			names = append(names, fmt.Sprintf("%s %s%v", x.Name, x.DType, x.Shape))
		}
		return fmt.Errorf("the client read a batch without %s [n<=%d, 3, %d, %d] images: %v", want, cfg.batch, cfg.size, cfg.size, names)
	}
	if cut != (worker == client.SuffixWorker) {
		return fmt.Errorf("the batch came from %q (cut %v)", worker, cut)
	}
	return nil
}
