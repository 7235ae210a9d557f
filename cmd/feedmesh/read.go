package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport/batch"
)

func init() {
	register(cli.Command{Name: "read", Summary: "read a job's batches from the cluster (creates or joins the job)", Run: runRead})
	register(cli.Command{Name: "jobs", Summary: "list the cluster's jobs", Run: runJobs})
}

// readSummary is `feedmesh read --json`'s output.
type readSummary struct {
	Job       string                   `json:"job"`
	Batches   int64                    `json:"batches"`
	Elements  int64                    `json:"elements"`
	Bytes     int64                    `json:"bytes"`
	WireBytes int64                    `json:"wire_bytes"` // the batches on the network (unpadded, compressed)
	Seconds   float64                  `json:"seconds"`
	Workers   int                      `json:"workers"`
	PerWorker map[string]workerSummary `json:"per_worker"`
	// JobState is the job's state when the read ended (running, finished,
	// failed); SplitsLost and NumSplits (DYNAMIC) say how many of the
	// dataset's splits the job lost, at most once, to workers that died or
	// restarted while they held them (client.Stats.SplitsLost).
	JobState   string `json:"job_state,omitempty"`
	SplitsLost int64  `json:"splits_lost"`
	NumSplits  int64  `json:"num_splits,omitempty"`
	// Delivery is the job's guarantee (DYNAMIC: exactly-once or
	// at-most-once); Requeued (exactly-once) counts splits of workers
	// that died, read again by others without what was delivered.
	Delivery string `json:"delivery,omitempty"`
	Requeued int64  `json:"splits_requeued,omitempty"`
	// Note says what the reader should know about a surprising result:
	// nothing read from a job that had already run to its end, or the
	// copies that sharing off delivers.
	Note string `json:"note,omitempty"`
	// Share (with --share): batches read from the workers' share windows,
	// those this job caused to be produced, those evicted before it read them.
	Share *api.JobShareSummary `json:"share,omitempty"`
	// Coordinated (with --coordinated): rounds read and skipped, and the
	// padded and real tokens of this consumer's batches.
	Coordinated *coordSummary `json:"coordinated,omitempty"`

	padded, tokens int64 // coordinated: this consumer's token counts
}

// workerSummary is what one worker delivered, in readSummary's words.
type workerSummary struct {
	Batches   int64 `json:"batches"`
	Elements  int64 `json:"elements"`
	Bytes     int64 `json:"bytes"`
	WireBytes int64 `json:"wire_bytes"`
}

// coordSummary is a coordinated consumer's part of readSummary.
type coordSummary struct {
	Index         int   `json:"index"`
	Rounds        int64 `json:"rounds"`
	SkippedRounds int64 `json:"skipped_rounds"`
	PaddedTokens  int64 `json:"padded_tokens"`
	Tokens        int64 `json:"tokens"`
}

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("read", "--spec FILE --job NAME [flags]", stderr)
	cf := addClientFlags(fs)
	specPath := fs.String("spec", "", "dataset spec, YAML or JSON (required)")
	job := fs.String("job", "", "job name; readers that name the same job share its data (required)")
	delivery := fs.String("delivery", "", "with --sharding dynamic: exactly-once (the default: a dead worker's splits are read again, skipping what was delivered) or at-most-once (they are lost; the default with --share or --coordinated)")
	sharding := fs.String("sharding", "dynamic", "dynamic (each element once, split among the workers), off (every worker reads the whole dataset: one copy per worker) or static")
	epochs := fs.Int64("epochs", 1, "passes over the dataset")
	take := fs.Int64("take", 0, "stop after N batches (0: read to the end)")
	window := fs.Int("window", 4, "batches each worker may send ahead")
	maxWorkers := fs.Int("max-workers", 0, "cap on workers serving the job (0: all)")
	shareFlag := fs.Bool("share", false, "ephemeral sharing: jobs of the same spec, sharding (off or dynamic) and epochs that all pass --share compute each batch once per worker; a job that lags more than the worker's share window behind skips batches instead of slowing the others")
	coordinated := fs.Bool("coordinated", false, "coordinated reads: the --consumers readers of the job get, in each round, batches of the same length bucket from one worker (spec must end in bucket_by_sequence_length; sharding becomes dynamic)")
	consumers := fs.Int("consumers", 0, "with --coordinated: how many consumers (trainer ranks) read the job in rounds")
	index := fs.Int("index", 0, "with --coordinated: this reader's consumer index in [0, --consumers)")
	compression := fs.String("compression", "none", "compress batches on the wire: none, lz4 (cheap to decompress) or zstd (smaller, costs the workers more CPU); for links slower than the workers")
	padFinal := fs.Bool("pad-final-round", false, "with --coordinated: pad the final partial rounds out with empty batches instead of dropping them")
	tty := isTerminal(stderr)
	progress := fs.Bool("progress", tty, "show live progress on stderr: a line redrawn in place on a terminal, a line a second elsewhere (default: when stderr is a terminal)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if *specPath == "" || *job == "" {
		fs.Usage()
		return fmt.Errorf("--spec and --job are required")
	}
	if *coordinated {
		if *consumers < 1 || *index < 0 || *index >= *consumers {
			return fmt.Errorf("--coordinated needs --consumers m >= 1 and --index i in [0, m), got m=%d i=%d", *consumers, *index)
		}
	}
	if _, err := batch.ParseCompression(*compression); err != nil {
		return fmt.Errorf("--compression: %w", err)
	}
	sh, err := api.ParseSharding(*sharding)
	if err != nil {
		return fmt.Errorf("--sharding: %w", err)
	}
	dl, err := api.ParseDelivery(*delivery)
	if err != nil {
		return fmt.Errorf("--delivery: %w", err)
	}
	spec, err := pipeline.LoadFile(*specPath)
	if err != nil {
		return err
	}
	c, err := cf.dial(ctx, client.Options{Window: *window})
	if err != nil {
		return err
	}
	defer c.Close()
	existing, err := findJob(ctx, c, *job, *cf.timeout)
	if err != nil {
		return err
	}
	it, err := c.Distribute(ctx, spec, client.JobOptions{
		Name: *job, Sharding: sh, Epochs: *epochs, MaxWorkers: *maxWorkers, Share: *shareFlag,
		Coordinated: *coordinated, NumConsumers: *consumers, ConsumerIndex: *index, PadFinalRound: *padFinal,
		Compression: *compression, Delivery: dl,
	})
	if err != nil {
		return err
	}
	defer it.Close()
	sum, err := consume(ctx, it, *take, progressTo(*progress, tty, stderr))
	if err != nil {
		return err
	}
	sum.Note = readNote(sum, existing, sh)
	if *shareFlag {
		sctx, cancel := context.WithTimeout(ctx, *cf.timeout)
		if st, err := it.ShareStats(sctx); err == nil {
			sum.Share = &st
		}
		cancel()
	}
	if *coordinated {
		st := it.Stats()
		cs := &coordSummary{Index: *index, Rounds: st.Rounds, SkippedRounds: st.SkippedRounds, PaddedTokens: sum.padded, Tokens: sum.tokens}
		sum.Coordinated = cs
	}
	if *cf.jsonOut {
		return cli.WriteJSON(stdout, sum)
	}
	printReadSummary(stdout, sum)
	return nil
}

// consume reads it to the end (or take batches), reporting progress to p.
func consume(ctx context.Context, it *client.Iterator, take int64, p progressLine) (readSummary, error) {
	start := time.Now()
	last := start
	var lastBytes, lastBatches int64
	var padded, tokens int64
	for take <= 0 || it.Stats().Batches < take {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readSummary{}, err
		}
		if h := b.Round; h != nil && h.Index >= 0 && h.Index < len(h.PaddedTokens) {
			padded += h.PaddedTokens[h.Index]
			tokens += h.Tokens
		}
		b.Release() // only counted: its buffer can take the next batch
		if p.w != nil && time.Since(last) >= p.every {
			s := it.Stats()
			dt := time.Since(last).Seconds()
			fmt.Fprintf(p.w, "%s%8d batches %10d elements  %7.1f batches/s %8.1f MB/s  workers %d   %s",
				p.start, s.Batches, s.Rows, float64(s.Batches-lastBatches)/dt, float64(s.Bytes-lastBytes)/dt/1e6, len(s.Workers), p.end)
			last, lastBytes, lastBatches = time.Now(), s.Bytes, s.Batches
		}
	}
	if p.w != nil && p.end == "" {
		fmt.Fprintln(p.w)
	}
	s := it.Stats()
	per := make(map[string]workerSummary, len(s.Workers))
	for n, ws := range s.Workers {
		per[n] = workerSummary{Batches: ws.Batches, Elements: ws.Rows, Bytes: ws.Bytes, WireBytes: ws.WireBytes}
	}
	return readSummary{Job: it.Job(), Batches: s.Batches, Elements: s.Rows, Bytes: s.Bytes, WireBytes: s.WireBytes,
		Seconds: time.Since(start).Seconds(), Workers: len(s.Workers), PerWorker: per, padded: padded, tokens: tokens,
		JobState: s.JobState, SplitsLost: s.SplitsLost, NumSplits: s.NumSplits, Delivery: s.Delivery, Requeued: requeued(s)}, nil
}

// progressLine is where and how consume reports progress: nowhere (w nil),
// a line redrawn in place four times a second on a terminal, or a line a
// second elsewhere (a log, a pipe).
type progressLine struct {
	w          io.Writer
	every      time.Duration
	start, end string
}

func progressTo(on, tty bool, w io.Writer) progressLine {
	switch {
	case !on:
		return progressLine{}
	case tty:
		return progressLine{w: w, every: 250 * time.Millisecond, start: "\r"}
	default:
		return progressLine{w: w, every: time.Second, end: "\n"}
	}
}

// findJob returns the job named name if the cluster has one.
func findJob(ctx context.Context, c *client.Client, name string, timeout time.Duration) (*api.JobInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		if jobs[i].Name == name {
			return &jobs[i], nil
		}
	}
	return nil, nil
}

// readNote explains a result that would otherwise surprise: no data from a
// job that existed before this reader (it had run to its end: jobs are
// named runs), or the copies that sharing off delivers.
func readNote(s readSummary, existing *api.JobInfo, sh api.Sharding) string {
	switch {
	case s.Elements == 0 && existing != nil:
		return fmt.Sprintf("job %q delivered nothing: a job of that name already existed (created %s) and had delivered its data; a job is one run of its dataset, so give a new --job name to read the dataset again",
			s.Job, existing.CreatedAt.Format(time.RFC3339))
	case sh == api.Off && s.Workers > 1:
		return fmt.Sprintf("sharding off: each of the %d workers read the whole dataset, so this is %d copies of it (--sharding dynamic reads it once, split among the workers)", s.Workers, s.Workers)
	case s.SplitsLost > 0:
		return fmt.Sprintf("data lost: %d of the dataset's %d splits were lost (delivery at-most-once: a worker died or restarted while it held them, and what it had not sent of them is not read again; the default, exactly-once, reads them again); `feedmesh jobs` shows the job's loss",
			s.SplitsLost, s.NumSplits)
	}
	return ""
}

func printReadSummary(w io.Writer, s readSummary) {
	fmt.Fprintf(w, "job %s: %d batches, %d elements, %.1f MB (%.1f MB on the wire) in %.2f s (%.1f batches/s, %.1f MB/s) from %d workers\n",
		s.Job, s.Batches, s.Elements, float64(s.Bytes)/1e6, float64(s.WireBytes)/1e6, s.Seconds, float64(s.Batches)/s.Seconds, float64(s.Bytes)/1e6/s.Seconds, s.Workers)
	names := make([]string, 0, len(s.PerWorker))
	for n := range s.PerWorker {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKER\tBATCHES\tELEMENTS\tMB\tMB/s")
	for _, n := range names {
		ws := s.PerWorker[n]
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f\t%.1f\n", n, ws.Batches, ws.Elements, float64(ws.Bytes)/1e6, float64(ws.Bytes)/1e6/s.Seconds)
	}
	tw.Flush()
	if c := s.Coordinated; c != nil {
		fmt.Fprintf(w, "coordinated: consumer %d read %d rounds (%d skipped), %d padded tokens of which %d real\n",
			c.Index, c.Rounds, c.SkippedRounds, c.PaddedTokens, c.Tokens)
	}
	if sh := s.Share; sh != nil {
		fmt.Fprintf(w, "sharing: %d batches read from share windows (%d hits, %d produced for this job), %d evicted before this job read them\n",
			sh.Read, sh.Hits, sh.Produced, sh.EvictedBeforeRead)
	}
	if s.SplitsLost > 0 {
		fmt.Fprintf(w, "lost: %d of %d splits (at most once: their worker died or restarted)\n", s.SplitsLost, s.NumSplits)
	}
	if s.Requeued > 0 {
		fmt.Fprintf(w, "exactly once: %d splits of workers that died were read again elsewhere, without the elements already delivered\n", s.Requeued)
	}
	if s.Note != "" {
		fmt.Fprintln(w, "note: "+s.Note)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("jobs", "[--addr host:port] [--json]", stderr)
	cf := addClientFlags(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	c, err := cf.dial(ctx, client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *cf.timeout)
	defer cancel()
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return err
	}
	if *cf.jsonOut {
		if jobs == nil {
			jobs = []api.JobInfo{}
		}
		return cli.WriteJSON(stdout, jobs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tSHARDING\tCOMPRESSION\tCONSUMERS\tWORKERS\tEPOCH\tSPLITS leased/finished/lost/total\tSHARE read/hits/produced/evicted\tDATASET")
	for _, j := range jobs {
		live := 0
		for _, w := range j.Workers {
			if !w.Expired {
				live++
			}
		}
		comp := j.Options.Compression
		if comp == "" {
			comp = "none"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d (%d expired)\t%d/%d\t%d/%d/%d/%d\t%s\t%.12s\n", j.Name, j.State, j.Options.Sharding, comp, len(j.Consumers),
			live, len(j.Workers)-live, j.Epoch+1, j.Options.Epochs, j.Leased, j.Finished, j.Lost, j.NumSplits, shareColumn(j), j.Fingerprint)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, j := range jobs {
		if j.State == api.JobFailed {
			fmt.Fprintf(stdout, "job %s failed: %s\n", j.Name, j.Failure)
		}
	}
	return nil
}

// shareColumn is the SHARE column of `feedmesh jobs`: the job's sharing
// counters summed over its workers, and how many workers did not answer.
func shareColumn(j api.JobInfo) string {
	sh := j.Share
	if !j.Options.Share {
		return "-"
	}
	if sh == nil {
		return "?"
	}
	out := fmt.Sprintf("%d/%d/%d/%d", sh.Read, sh.Hits, sh.Produced, sh.EvictedBeforeRead)
	if len(sh.Unreachable) > 0 {
		out += fmt.Sprintf(" (%d workers unreachable)", len(sh.Unreachable))
	}
	return out
}

// requeued is how many splits an exactly-once job read again.
func requeued(s client.Stats) int64 {
	if s.Exact == nil {
		return 0
	}
	return s.Exact.Requeued
}
