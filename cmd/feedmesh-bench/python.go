package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/bench/transportbench"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	registerBench(cli.Command{Name: "python", Summary: "the Python client vs the Go client reading one job (text, 1 MiB raw): batches/s and client CPU-s/GB; a torch DataLoader tokenizing in Python vs feedmesh.torch", Run: benchPython})
}

// The workloads of the python benchmark.
const (
	pyText       = "text"       // bucketed token batches, Go and Python clients
	pyRaw        = "raw"        // ~1 MiB batches of random bytes, Go and Python clients
	pyDataLoader = "dataloader" // a torch DataLoader tokenizing in Python vs feedmesh.torch
)

// pyGoReaderFlag, as the first argument of `feedmesh-bench python`, makes
// this process the Go reader: the Go client's side of the comparison, a
// process of its own as the Python reader is (not listed in the help).
const pyGoReaderFlag = "--go-reader"

// pyGoReaderCommand builds the Go reader's command: this binary in the
// hidden mode. A test binary is not feedmesh-bench, so tests replace it.
var pyGoReaderCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to start the Go reader: %w", err)
	}
	return exec.CommandContext(ctx, exe, append([]string{"python", pyGoReaderFlag}, args...)...), nil
}

// Sizes of the jobs: far more data than any window reads.
const (
	pyTextExamples = 1 << 26
	pyRawBatches   = 1 << 22
	// pyGCAfter is the jobs' GCAfter: a finished run's job goes at once,
	// so the next run has the machine to itself.
	pyGCAfter = 200 * time.Millisecond
	// pyClientOptions are the Python readers' feedmesh.Client keywords:
	// the defaults, with the transport the in-process nodes run (the Go
	// reader's client.Options likewise).
	pyClientOptions = `{"transport": "fast"}`
)

// pyBounds are the text pipeline's buckets: transportbench.TextBatches'.
var (
	pyBoundaries = []int64{32, 64, 128, 256, 512}
	pyBatchSizes = []int64{64, 64, 32, 16, 8, 4}
)

// pyTextOps tokenizes and buckets, as the transport benchmark's text
// workload does (transportbench.TextBatches).
func pyTextOps(s *pipeline.Spec) *pipeline.Spec {
	s.Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 1)
	return s.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: pyBoundaries, BatchSizes: pyBatchSizes})
}

// pyTextSpec is the text workload: heavy-tailed synthetic text (the
// transport benchmark's seed) → tokenize_whitespace → bucket_by_sequence_length.
func pyTextSpec() *pipeline.Spec {
	return pyTextOps(pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: pyTextExamples, Seed: transportbench.TextSeed})))
}

// pyRawSpec is the raw workload: synthetic records (random bytes) batched
// rows at a time into batches of about batchBytes, as the fanin benchmark's.
func pyRawSpec(batchBytes, rows int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{
		Kind: "records", Count: pyRawBatches * rows, SplitSize: faninSplitBatches * rows, RecordBytes: int(batchBytes / rows),
	}))
	return s.Batch(rows, false)
}

// pyResult is a reader's report (one JSON line on its stdout) and what
// the harness measured of the process.
type pyResult struct {
	Batches    int64   `json:"batches"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_s"`
	// The dataloader workload's: what the training loop received.
	Rows       int64 `json:"rows"`
	Tokens     int64 `json:"tokens"`
	TokenIDSum int64 `json:"token_id_sum"`
	// processCPU is the whole process's CPU time (ProcessState: user and
	// system, its start and exit included).
	processCPU float64
}

func (r pyResult) batchesPerS() float64 { return float64(r.Batches) / r.Seconds }
func (r pyResult) cpuPerGB() float64    { return r.CPUSeconds / (float64(r.Bytes) / 1e9) }

// pyBench is one invocation's setup.
type pyBench struct {
	python, repo, lib string
	c                 *localcluster.Cluster
	dir               string // temporary: specs, the text file
	warmup, seconds   float64
	stderr            io.Writer
	gogc              int    // the Python process's GOGC (libfeedmesh's collector); 0: inherited
	dlOffload         string // the dataloader workload's FeedmeshDataset offload
}

func benchPython(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == pyGoReaderFlag {
		return pyGoReader(ctx, args[1:], stdout, stderr)
	}
	fs := prog.NewFlagSet("python", "[--workloads text,raw,dataloader] [--runs N] [--seconds S] [--python PATH] [--json]", stderr)
	defPython := os.Getenv("FEEDMESH_PYTHON")
	if defPython == "" {
		defPython = "/usr/bin/python3"
	}
	python := fs.String("python", defPython, "the Python interpreter, with numpy (and torch for the dataloader workload); default $FEEDMESH_PYTHON, else /usr/bin/python3")
	repo := fs.String("repo", "", "the feedmesh checkout: python/ and cmd/libfeedmesh (default: found from the working directory upwards)")
	lib := fs.String("lib", "", "a libfeedmesh.so to use instead of building one from the checkout")
	workloadsFlag := fs.String("workloads", "text,raw,dataloader", "workloads to run: text, raw, dataloader")
	runs := fs.Int("runs", 5, "runs; each run measures every client of every workload once, alternating their order; medians are reported")
	seconds := fs.Float64("seconds", 3, "text, raw: the measured window of each reader")
	warmup := fs.Float64("warmup", 1, "text, raw: seconds each reader reads after its first batch, before the window")
	nodes := fs.Int("nodes", 2, "in-process nodes (all workers)")
	rawBatchBytes := fs.Int64("raw-batch-bytes", 1<<20, "raw: bytes of record data per batch")
	rawRows := fs.Int64("raw-rows", 16, "raw: records per batch")
	pyGOGC := fs.Int("python-gogc", 0, "GOGC of the Python processes only (the collector of the Go runtime libfeedmesh starts in them), to weigh its share of the Python reader's CPU; 0: inherited")
	dlOffload := fs.String("dataloader-offload", "remote", "dataloader: the FeedmeshDataset's offload: remote (the nodes tokenize and bucket, what the workload compares) or auto (the dataset's default; on this one machine its local worker shares the nodes' cores)")
	dlLines := fs.Int64("dataloader-lines", 200000, "dataloader: lines of the text file read once per run by each way")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows. text and raw: workload, client (go, python), batches_per_s and client_cpu_s_per_gb (medians over the runs; CPU of the reader process over its window, by getrusage, per 10^9 bytes of batches as client.Stats counts them), ratio_vs_go (batches/s: the median over runs of python ÷ go within each run; 1 for go). dataloader: workload, client (dataloader-0, dataloader-2: torch DataLoader with 0 or 2 worker processes tokenizing and bucketing in Python; feedmesh: feedmesh.torch.FeedmeshDataset, the cluster's workers doing that work), batches_per_s (one pass over the file, into the training loop), client_cpu_s_per_gb (the training process and its DataLoader workers, per 10^9 bytes of tokens and tokens_length), ratio_vs_feedmesh (batches/s: median over runs of this ÷ feedmesh within each run)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: feedmesh-bench python [flags]

Builds the Python package's library (go build -buildmode=c-shared ./cmd/libfeedmesh, into a
temporary directory, unless --lib), starts --nodes in-process nodes and, in every run:

  text, raw: reads a job with the Go client and then one with the Python client (feedmesh.Client),
    or the other way round in odd runs, each in a process of its own (this binary in a hidden mode;
    --python running python/bench/read_job.py), with the same options (the defaults, the fast
    transport) and DYNAMIC exactly-once sharding. Each reader reads --warmup seconds after its first
    batch, then measures --seconds: batches/s and its CPU time (getrusage), per GB of batches.
    text: synthetic text → tokenize_whitespace → bucket_by_sequence_length (the transport
    benchmark's text pipeline); raw: --raw-rows random records per batch of --raw-batch-bytes.
  dataloader: one pass over a text file of --dataloader-lines lines (the text workload's synthetic
    text, written once) into a torch training loop (python/bench/dataloader.py), three ways: a
    DataLoader with 0 and with 2 worker processes whose dataset tokenizes (the same hash) and
    buckets (the same buckets) in Python, and feedmesh.torch.FeedmeshDataset (num_workers=0) over a
    job of the same file and pipeline run by the cluster's workers. Rows, tokens and the sum of the
    token ids must agree between the three.

Skips (exit 0, no rows) when the interpreter or numpy is missing, and the dataloader workload
when torch is. The nodes and the readers share the machine's cores. Progress goes to stderr.

Flags:`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var workloads []string
	for _, w := range cli.SplitList(*workloadsFlag) {
		if w != pyText && w != pyRaw && w != pyDataLoader {
			return fmt.Errorf("--workloads: %q is not text, raw or dataloader", w)
		}
		if !slices.Contains(workloads, w) {
			workloads = append(workloads, w)
		}
	}
	switch {
	case len(workloads) == 0:
		return errors.New("--workloads: none given")
	case *runs < 1 || *runs > 100:
		return fmt.Errorf("--runs: %d is not in [1, 100]", *runs)
	case !(*seconds > 0) || *seconds > faninMaxSeconds:
		return fmt.Errorf("--seconds: %g is not in (0, %d]", *seconds, faninMaxSeconds)
	case !(*warmup >= 0) || *warmup > faninMaxSeconds:
		return fmt.Errorf("--warmup: %g is not in [0, %d]", *warmup, faninMaxSeconds)
	case *nodes < 1 || *nodes > 16:
		return fmt.Errorf("--nodes: %d is not in [1, 16]", *nodes)
	case *rawBatchBytes < 1 || *rawBatchBytes > faninMaxBatchBytes:
		return fmt.Errorf("--raw-batch-bytes: %d is not in [1, %d] (a batch must fit in one transport frame)", *rawBatchBytes, faninMaxBatchBytes)
	case *rawRows < 1 || *rawRows > *rawBatchBytes || *rawRows > 4096:
		return fmt.Errorf("--raw-rows: %d is not in [1, min(4096, --raw-batch-bytes)]", *rawRows)
	case *dlLines < 1 || *dlLines > 100_000_000:
		return fmt.Errorf("--dataloader-lines: %d is not in [1, 10^8]", *dlLines)
	}

	if msg := pyCheckImport(ctx, *python, "numpy"); msg != "" {
		fmt.Fprintf(stderr, "python: skipped: %s (install python3-numpy, or give --python an interpreter that has numpy)\n", msg)
		return printPyRows(stdout, *jsonOut, nil)
	}
	if *repo == "" {
		r, err := findRepo()
		if err != nil {
			return err
		}
		*repo = r
	}
	for _, p := range []string{"python/feedmesh/__init__.py", "python/bench/read_job.py", "python/bench/dataloader.py"} {
		if _, err := os.Stat(filepath.Join(*repo, p)); err != nil {
			return fmt.Errorf("--repo %s is not a feedmesh checkout with the Python package and its benchmark scripts: %w", *repo, err)
		}
	}
	dir, err := os.MkdirTemp("", "feedmesh-bench-python-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Importing torch takes seconds: check for it while the library builds.
	var torchMsg string
	var wg sync.WaitGroup
	if slices.Contains(workloads, pyDataLoader) {
		wg.Go(func() { torchMsg = pyCheckImport(ctx, *python, "torch") })
	}
	if *lib == "" {
		*lib, err = buildPyLibrary(ctx, *repo, dir, stderr)
	} else if _, err = os.Stat(*lib); err != nil {
		err = fmt.Errorf("--lib: %w", err)
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if torchMsg != "" {
		fmt.Fprintf(stderr, "python: the dataloader workload is skipped: %s (install python3-torch)\n", torchMsg)
		workloads = slices.DeleteFunc(workloads, func(w string) bool { return w == pyDataLoader })
		if len(workloads) == 0 {
			return printPyRows(stdout, *jsonOut, nil)
		}
	}

	fmt.Fprintf(stderr, "starting %d in-process nodes …\n", *nodes)
	c, cleanup, err := jobsCluster(ctx, *nodes, withData([]string{dir}))
	if err != nil {
		return err
	}
	defer cleanup()
	b := &pyBench{python: *python, repo: *repo, lib: *lib, c: c, dir: dir, warmup: *warmup, seconds: *seconds, stderr: stderr, gogc: *pyGOGC, dlOffload: *dlOffload}

	var rows []benchRow
	for _, w := range workloads {
		var wrows []benchRow
		var err error
		switch w {
		case pyText:
			wrows, err = b.compare(ctx, w, pyTextSpec(), *runs)
		case pyRaw:
			wrows, err = b.compare(ctx, w, pyRawSpec(*rawBatchBytes, *rawRows), *runs)
		case pyDataLoader:
			wrows, err = b.dataLoader(ctx, *dlLines, *runs)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		rows = append(rows, wrows...)
	}
	return printPyRows(stdout, *jsonOut, rows)
}

func printPyRows(stdout io.Writer, jsonOut bool, rows []benchRow) error {
	if jsonOut {
		if rows == nil {
			rows = []benchRow{}
		}
		return cli.WriteJSON(stdout, rows)
	}
	if len(rows) == 0 {
		return nil // skipped: stderr said why
	}
	return printRows(stdout, false, []string{"workload", "client", "batches_per_s", "client_cpu_s_per_gb", "ratio_vs_go", "ratio_vs_feedmesh"}, rows)
}

// pyCheckImport says why python cannot import module ("" if it can).
func pyCheckImport(ctx context.Context, python, module string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", "import "+module).CombinedOutput()
	if err == nil {
		return ""
	}
	msg := fmt.Sprintf("%s cannot import %s: %v", python, module, err)
	if l := lastLine(string(out)); l != "" {
		msg += ": " + l
	}
	return msg
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// findRepo finds the feedmesh checkout from the working directory upwards.
func findRepo() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == "github.com/feedmesh/feedmesh" {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no feedmesh checkout (go.mod of github.com/feedmesh/feedmesh) in %s or above: run from the checkout, or give --repo", wd)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func modulePath(gomod []byte) string {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// goCommand is the go command: on PATH, else the toolchain's that built us.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := runtime.GOROOT(); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

// buildPyLibrary builds cmd/libfeedmesh as a C shared library into dir.
func buildPyLibrary(ctx context.Context, repo, dir string, stderr io.Writer) (string, error) {
	lib := filepath.Join(dir, "libfeedmesh.so")
	fmt.Fprintf(stderr, "building the Python package's library: go build -buildmode=c-shared -o %s ./cmd/libfeedmesh (in %s) …\n", lib, repo)
	start := time.Now()
	cmd := exec.CommandContext(ctx, goCommand(), "build", "-buildmode=c-shared", "-o", lib, "./cmd/libfeedmesh")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the library (it needs cgo and a C compiler): %v\n%s", err, out)
	}
	st, err := os.Stat(lib)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "built in %.1f s: %.1f MB\n", time.Since(start).Seconds(), float64(st.Size())/1e6)
	return lib, nil
}

// writeSpec writes spec as JSON into the temporary directory: the one
// file both readers load.
func (b *pyBench) writeSpec(name string, spec *pipeline.Spec) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	p := filepath.Join(b.dir, name+".json")
	return p, os.WriteFile(p, data, 0o644)
}

// pythonCmd is the Python interpreter running a script of python/bench.
func (b *pyBench) pythonCmd(ctx context.Context, script string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.python, append([]string{filepath.Join(b.repo, "python", "bench", script)}, args...)...)
	pp := filepath.Join(b.repo, "python")
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp += string(os.PathListSeparator) + old
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pp, "FEEDMESH_LIB="+b.lib, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	if b.gogc != 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOGC=%d", b.gogc))
	}
	return cmd
}

// runReader runs a reader process to its end and returns its report.
func runReader(cmd *exec.Cmd, stderr io.Writer) (pyResult, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return pyResult{}, fmt.Errorf("%s: %w (its messages are above)", filepath.Base(cmd.Path), err)
	}
	var res pyResult
	got := false
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) > 0 && line[0] == '{' {
			if err := json.Unmarshal(line, &res); err != nil {
				return pyResult{}, fmt.Errorf("%s: bad report %q: %w", filepath.Base(cmd.Path), line, err)
			}
			got = true
		}
	}
	if !got {
		return pyResult{}, fmt.Errorf("%s exited without a report: %q", filepath.Base(cmd.Path), out.String())
	}
	if res.Batches < 1 || !(res.Seconds > 0) || res.Bytes < 1 {
		return pyResult{}, fmt.Errorf("%s read %d batches (%d bytes) in %.3f s", filepath.Base(cmd.Path), res.Batches, res.Bytes, res.Seconds)
	}
	res.processCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return res, nil
}

// readerArgs are the flags both readers take.
func (b *pyBench) readerArgs(job, spec string) []string {
	return []string{
		"--addr", b.c.Node(0).Addr(), "--job", job, "--spec", spec,
		"--warmup", strconv.FormatFloat(b.warmup, 'g', -1, 64),
		"--seconds", strconv.FormatFloat(b.seconds, 'g', -1, 64),
	}
}

// readerTimeout bounds a reader process.
func (b *pyBench) readerTimeout() time.Duration {
	return time.Duration((b.warmup+b.seconds)*float64(time.Second)) + 2*time.Minute
}

// read runs one job with the Go or the Python reader, then waits until
// its tasks are gone.
func (b *pyBench) read(ctx context.Context, clientName, job, spec string) (pyResult, error) {
	ctx, cancel := context.WithTimeout(ctx, b.readerTimeout())
	defer cancel()
	var cmd *exec.Cmd
	if clientName == "go" {
		var err error
		if cmd, err = pyGoReaderCommand(ctx, b.readerArgs(job, spec)); err != nil {
			return pyResult{}, err
		}
	} else {
		cmd = b.pythonCmd(ctx, "read_job.py", append(b.readerArgs(job, spec),
			"--client-options", pyClientOptions, "--gc-after", strconv.FormatFloat(pyGCAfter.Seconds(), 'g', -1, 64))...)
	}
	res, err := runReader(cmd, b.stderr)
	if err != nil {
		return pyResult{}, err
	}
	return res, waitIdle(b.c)
}

// compare measures the Go and the Python reader on workload's spec, runs
// times, alternating which goes first.
func (b *pyBench) compare(ctx context.Context, workload string, spec *pipeline.Spec, runs int) ([]benchRow, error) {
	specPath, err := b.writeSpec(workload, spec)
	if err != nil {
		return nil, err
	}
	clients := []string{"go", "python"}
	res := map[string][]pyResult{}
	var ratios, cpuRatios []float64
	for r := range runs {
		order := clients
		if r%2 == 1 {
			order = []string{"python", "go"}
		}
		for _, cl := range order {
			job := fmt.Sprintf("py-%s-%s-%d-%d", workload, cl, r, time.Now().UnixNano())
			x, err := b.read(ctx, cl, job, specPath)
			if err != nil {
				return nil, fmt.Errorf("run %d, %s reader: %w", r, cl, err)
			}
			res[cl] = append(res[cl], x)
			fmt.Fprintf(b.stderr, "  %s run %d %-6s %8.0f batches/s %7.1f MB/s %6.2f CPU-s/GB (window: %.2f CPU-s in %.2f s; whole process %.2f CPU-s)\n",
				workload, r, cl, x.batchesPerS(), float64(x.Bytes)/x.Seconds/1e6, x.cpuPerGB(), x.CPUSeconds, x.Seconds, x.processCPU)
		}
		g, p := res["go"][r], res["python"][r]
		ratios = append(ratios, p.batchesPerS()/g.batchesPerS())
		cpuRatios = append(cpuRatios, p.cpuPerGB()/g.cpuPerGB())
		fmt.Fprintf(b.stderr, "  %s run %d python/go: batches/s %.3f, CPU-s/GB %.3f\n", workload, r, ratios[r], cpuRatios[r])
	}
	fmt.Fprintf(b.stderr, "%s: python/go medians over %d runs: batches/s %.3f (runs %s), CPU-s/GB %.3f (runs %s)\n",
		workload, runs, median(ratios), fmtFloats(ratios), median(cpuRatios), fmtFloats(cpuRatios))
	var rows []benchRow
	for _, cl := range clients {
		var bps, cpu []float64
		for _, x := range res[cl] {
			bps = append(bps, x.batchesPerS())
			cpu = append(cpu, x.cpuPerGB())
		}
		ratio := 1.0
		if cl == "python" {
			ratio = median(ratios)
		}
		rows = append(rows, benchRow{"workload": workload, "client": cl, "batches_per_s": median(bps), "client_cpu_s_per_gb": median(cpu), "ratio_vs_go": ratio})
	}
	return rows, nil
}

func fmtFloats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " ")
}

// writeTextFile writes n lines of the text workload's synthetic text.
func writeTextFile(ctx context.Context, path string, n int64) error {
	spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: n, Seed: transportbench.TextSeed}))
	ss, err := pipeline.Splits(spec)
	if err != nil {
		return err
	}
	it, err := pipeline.Open(ctx, spec, ss)
	if err != nil {
		return err
	}
	defer it.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for {
		el, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			f.Close()
			return err
		}
		t, ok := el.Get("text")
		if !ok {
			f.Close()
			return errors.New("the synthetic text source gave an element without text")
		}
		line := t.Entry(0)
		if bytes.IndexByte(line, '\n') >= 0 {
			f.Close()
			return errors.New("the synthetic text source gave a text with a line break")
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dataLoader runs the dataloader workload: three ways of one pass over
// the same text file into a torch training loop, runs times.
func (b *pyBench) dataLoader(ctx context.Context, lines int64, runs int) ([]benchRow, error) {
	file := filepath.Join(b.dir, "text.txt")
	fmt.Fprintf(b.stderr, "dataloader: writing %d lines of synthetic text to %s …\n", lines, file)
	if err := writeTextFile(ctx, file, lines); err != nil {
		return nil, fmt.Errorf("write the text file: %w", err)
	}
	fsrc := pipeline.FromFiles("lines", file)
	fsrc.Files.SplitBytes = 256 << 10 // splits for DYNAMIC leasing across the workers
	specPath, err := b.writeSpec("dataloader", pyTextOps(pipeline.NewSpec(fsrc)))
	if err != nil {
		return nil, err
	}
	join := func(xs []int64) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = strconv.FormatInt(x, 10)
		}
		return strings.Join(parts, ",")
	}
	common := []string{"--vocab-size", "32000", "--boundaries", join(pyBoundaries), "--batch-sizes", join(pyBatchSizes)}
	variants := []string{"dataloader-0", "dataloader-2", "feedmesh"}
	res := map[string][]pyResult{}
	ratios := map[string][]float64{}
	var want *pyResult
	for r := range runs {
		for i := range variants {
			v := variants[(i+r)%len(variants)] // each variant goes first in turn
			var args []string
			switch v {
			case "feedmesh":
				job := fmt.Sprintf("py-dataloader-%d-%d", r, time.Now().UnixNano())
				args = append([]string{"--mode", "feedmesh", "--addr", b.c.Node(0).Addr(), "--job", job, "--spec", specPath, "--client-options", pyClientOptions,
					"--gc-after", strconv.FormatFloat(pyGCAfter.Seconds(), 'g', -1, 64), "--offload", b.dlOffload}, common...)
			default:
				args = append([]string{"--mode", "dataloader", "--file", file, "--num-workers", strings.TrimPrefix(v, "dataloader-")}, common...)
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
			x, err := runReader(b.pythonCmd(cctx, "dataloader.py", args...), b.stderr)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("run %d, %s: %w", r, v, err)
			}
			if v == "feedmesh" {
				if err := waitIdle(b.c); err != nil {
					return nil, err
				}
			}
			fmt.Fprintf(b.stderr, "  dataloader run %d %-12s %8.0f batches/s %5.2f s %6.2f CPU-s/GB (%.2f CPU-s; whole process %.2f CPU-s) %d rows %d tokens\n",
				r, v, x.batchesPerS(), x.Seconds, x.cpuPerGB(), x.CPUSeconds, x.processCPU, x.Rows, x.Tokens)
			if want == nil {
				want = &x
			} else if x.Rows != want.Rows || x.Tokens != want.Tokens || x.TokenIDSum != want.TokenIDSum {
				return nil, fmt.Errorf("run %d, %s read other data than the first reader: %d rows, %d tokens, token id sum %d; want %d, %d, %d",
					r, v, x.Rows, x.Tokens, x.TokenIDSum, want.Rows, want.Tokens, want.TokenIDSum)
			}
			res[v] = append(res[v], x)
		}
		fm := res["feedmesh"][r].batchesPerS()
		for _, v := range variants {
			ratios[v] = append(ratios[v], res[v][r].batchesPerS()/fm)
		}
		fmt.Fprintf(b.stderr, "  dataloader run %d feedmesh ÷ dataloader-0 %.2f, ÷ dataloader-2 %.2f (batches/s)\n", r, 1/ratios["dataloader-0"][r], 1/ratios["dataloader-2"][r])
	}
	if want.Rows != lines {
		return nil, fmt.Errorf("the readers got %d rows of the file's %d lines", want.Rows, lines)
	}
	var rows []benchRow
	for _, v := range variants {
		var bps, cpu []float64
		for _, x := range res[v] {
			bps = append(bps, x.batchesPerS())
			cpu = append(cpu, x.cpuPerGB())
		}
		rows = append(rows, benchRow{"workload": pyDataLoader, "client": v, "batches_per_s": median(bps), "client_cpu_s_per_gb": median(cpu), "ratio_vs_feedmesh": median(ratios[v])})
	}
	return rows, nil
}

// ---- the Go reader process

// addReaderFlags defines the flags of both readers (python/bench/read_job.py takes the same).
func addReaderFlags(fs *flag.FlagSet) (addr, job, spec *string, warmup, seconds *float64) {
	addr = fs.String("addr", "", "a node's QUIC address")
	job = fs.String("job", "", "job name")
	spec = fs.String("spec", "", "the dataset spec (a JSON or YAML file)")
	warmup = fs.Float64("warmup", 1, "seconds read after the first batch, before the window")
	seconds = fs.Float64("seconds", 3, "the measured window")
	return
}

// pyGoReader is the Go reader: what python/bench/read_job.py does, with
// the Go client. It calls Batch.Release after each batch, as the Python
// package does once a batch's arrays are gone.
func pyGoReader(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("python "+pyGoReaderFlag, "--addr HOST:PORT --job NAME --spec FILE [flags]", stderr)
	addr, job, specPath, warmupS, secondsS := addReaderFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *addr == "" || *job == "" || *specPath == "" {
		return errors.New("the Go reader needs --addr, --job and --spec")
	}
	if !(*secondsS > 0) || !(*warmupS >= 0) {
		return errors.New("--seconds must be > 0 and --warmup >= 0")
	}
	spec, err := pipeline.LoadFile(*specPath)
	if err != nil {
		return err
	}
	warmup := time.Duration(*warmupS * float64(time.Second))
	window := time.Duration(*secondsS * float64(time.Second))
	ctx, cancel := context.WithTimeout(ctx, warmup+window+90*time.Second)
	defer cancel()
	tcfg := transport.FastConfig()
	cl, err := client.Dial(ctx, *addr, client.Options{Transport: &tcfg})
	if err != nil {
		return err
	}
	defer cl.Close()
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: *job, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, GCAfter: pyGCAfter})
	if err != nil {
		return err
	}
	defer func() {
		if err := it.Close(); err != nil {
			fmt.Fprintf(stderr, "warning: Go reader: detach from the job: %v\n", err)
		}
	}()
	next := func() error {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return errors.New("the job ended before the window did: give it more data")
		}
		if err != nil {
			return err
		}
		b.Release()
		return nil
	}
	if err := next(); err != nil {
		return err
	}
	for t := time.Now(); time.Since(t) < warmup; {
		if err := next(); err != nil {
			return err
		}
	}
	st0, cpu0, t0 := it.Stats(), transportbench.CPUSeconds(), time.Now()
	for time.Since(t0) < window {
		if err := next(); err != nil {
			return err
		}
	}
	st1, cpu1, t1 := it.Stats(), transportbench.CPUSeconds(), time.Now()
	return cli.WriteJSON(stdout, pyResult{Batches: st1.Batches - st0.Batches, Bytes: st1.Bytes - st0.Bytes, Seconds: t1.Sub(t0).Seconds(), CPUSeconds: cpu1 - cpu0})
}
