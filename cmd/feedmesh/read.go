package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	register(cli.Command{Name: "read", Summary: "read a job's batches from the cluster (creates or joins the job)", Run: runRead})
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
	// LossCounted: the job is at-most-once and counts its loss exactly;
	// ElementsLost is that count, the source elements the dead workers'
	// splits emitted, or would have, that no consumer received
	// (client.Stats.ElementsLost; final when JobState is finished).
	LossCounted  bool  `json:"loss_counted,omitempty"`
	ElementsLost int64 `json:"elements_lost,omitempty"`
	// Delivery is the job's guarantee (DYNAMIC: exactly-once or
	// at-most-once); Requeued (exactly-once) counts splits of workers
	// that died, read again by others without what was delivered.
	Delivery string `json:"delivery,omitempty"`
	Requeued int64  `json:"splits_requeued,omitempty"`
	// Orphaned (exactly-once) counts splits of workers that died after
	// the job's last split was handed out, not read again when the read
	// ended: what they had produced and no consumer had received is
	// missing (splits.DynamicState.AllProduced).
	Orphaned int64 `json:"splits_orphaned,omitempty"`
	// WorkersDropped counts workers declared dead while they streamed to
	// this reader (client.Stats.WorkersDropped): at-most-once, what they
	// had made and not sent is lost beyond the splits counted lost.
	WorkersDropped int64 `json:"workers_dropped,omitempty"`
	// Reconnects counts streams reopened after they broke
	// (client.Stats.Reconnects): at-most-once, the batches on their way
	// on a broken stream are lost.
	Reconnects int64 `json:"reconnects,omitempty"`
	// StallFraction is the share of the read's time spent waiting for
	// data inside Next (the rest: writing --dump, the loop's own work);
	// BatchTimeSeconds the mean time per batch over the last 100
	// (client.Stats).
	StallFraction    float64 `json:"stall_fraction"`
	BatchTimeSeconds float64 `json:"batch_time_seconds"`
	// Offload is where the pipeline ran for this reader (--offload): the
	// decision, its inputs, predicted and measured rates.
	Offload *client.OffloadStats `json:"offload,omitempty"`
	// Reorder and Audit (--order deterministic): the reorder buffer's
	// figures and the visitation audit per epoch (client.Iterator.Audit).
	Reorder *client.ReorderStats `json:"reorder,omitempty"`
	Audit   []client.EpochAudit  `json:"audit,omitempty"`
	// Note says what the reader should know about a surprising result:
	// nothing read from a job that had already run to its end, or the
	// copies that sharing off delivers.
	Note string `json:"note,omitempty"`
	// Warnings are the client's (client.Stats.Warnings): what made the
	// job slower than it could be, such as fewer splits than workers.
	Warnings []string `json:"warnings,omitempty"`
	// Share (with --share): batches read from the workers' share windows,
	// those this job caused to be produced, those evicted before it read them.
	Share *api.JobShareSummary `json:"share,omitempty"`
	// Coordinated (with --coordinated): rounds read and skipped, and the
	// padded and real tokens of this consumer's batches.
	Coordinated *coordSummary `json:"coordinated,omitempty"`
	// Stopped says why reading stopped: "end" (the job's data ended, also
	// before --take), "take" (--take batches read) or "interrupted"
	// (SIGINT or SIGTERM). Take is --take.
	Stopped string `json:"stopped"`
	Take    int64  `json:"take,omitempty"`
	// Dump (with --dump) is the file the elements went to, Dumped how many.
	Dump   string `json:"dump,omitempty"`
	Dumped int64  `json:"dumped,omitempty"`
	// ResumedFrom (with --resume) is the checkpoint the job resumed from;
	// Checkpoint and CheckpointBytes (with --checkpoint) the one written
	// when reading stopped.
	ResumedFrom     string `json:"resumed_from,omitempty"`
	Checkpoint      string `json:"checkpoint,omitempty"`
	CheckpointBytes int    `json:"checkpoint_bytes,omitempty"`

	padded, tokens int64 // coordinated: this consumer's token counts
}

// workerSummary is what one worker delivered, in readSummary's words.
type workerSummary struct {
	// Batches the worker made; Elements it sent, in them or, of those,
	// CutElements one by one for this client's part of a cut pipeline.
	Batches     int64 `json:"batches"`
	Elements    int64 `json:"elements"`
	CutElements int64 `json:"cut_elements"`
	Bytes       int64 `json:"bytes"`
	WireBytes   int64 `json:"wire_bytes"`
}

// coordSummary is a coordinated consumer's part of readSummary.
type coordSummary struct {
	Index         int   `json:"index"`
	Rounds        int64 `json:"rounds"`
	FillerRounds  int64 `json:"filler_rounds"`
	SkippedRounds int64 `json:"skipped_rounds"`
	PaddedTokens  int64 `json:"padded_tokens"`
	Tokens        int64 `json:"tokens"`
}

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("read", "--spec FILE --job NAME [flags]", stderr)
	cf := addClientFlags(fs)
	jf := addJobFlags(fs)
	specPath := fs.String("spec", "", "dataset spec, YAML or JSON (required)")
	take := fs.Int64("take", 0, "stop after `N` batches, then leave the job (0: read to the end; the data may end first)")
	dumpPath := fs.String("dump", "", dumpHelp)
	ckPath := fs.String("checkpoint", "", "when reading stops (--take reached, the data's end, or Ctrl-C), write the job's checkpoint to `FILE` (atomically): it covers exactly the batches this read returned; --resume FILE goes on from there. Exactly-once jobs only")
	resumePath := fs.String("resume", "", "resume the job from the checkpoint in `FILE` (written by --checkpoint), without what it covers; same --spec, --job and --epochs. Exactly-once jobs only")
	resumeWait := fs.Duration("resume-wait", client.DefaultResumeWait, "with --resume: how long to wait for the checkpoints of the job's other consumers (a job that had several, two runs of --take --checkpoint within gc_after included, resumes once each has resumed with its own) before failing (0: wait for ever)")
	window := fs.Int("window", 4, "batches each worker may send ahead")
	colocation := fs.String("offload-colocation", "detect", "with --offload auto: detect (when every live worker node runs on this host, the nodes prepare with its CPUs: run remote without profiling) or ignore (decide by measurement, as for nodes elsewhere: nodes on this host with CPUs of their own)")
	profiles := fs.String("offload-profiles", "", "with --offload auto: a `FILE` where auto remembers what it measured of this pipeline on this host, so that a later read of the same pipeline naming the same file decides (and may cut the pipeline) without profiling first (default: none kept; every read profiles for itself)")
	tty := isTerminal(stderr)
	progress := fs.Bool("progress", tty, "show live progress on stderr: a line redrawn in place on a terminal, a line a second elsewhere (default: when stderr is a terminal)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if *specPath == "" || *jf.job == "" {
		fs.Usage()
		return fmt.Errorf("--spec and --job are required")
	}
	if *jf.coordinated {
		if *jf.consumers < 1 || *jf.index < 0 || *jf.index >= *jf.consumers {
			return fmt.Errorf("--coordinated needs --consumers m >= 1 and --index i in [0, m), got m=%d i=%d", *jf.consumers, *jf.index)
		}
	}
	if *take < 0 {
		return cli.InputError(fmt.Errorf("--take %d: want N >= 1 batches (or 0: read to the end)", *take))
	}
	opts, err := jf.options()
	if err != nil {
		return err
	}
	job := jf.job
	// Everything the flags get wrong fails here, before anything is
	// created: the dump, the job, the checkpoint. The options are
	// normalized once, here, and the client takes them so.
	n, err := client.NormalizeJobOptions(opts)
	if err != nil {
		return cli.InputError(fmt.Errorf("job %q: %w", *job, err))
	}
	if *ckPath != "" {
		if err := checkpointable("--checkpoint", n.Job()); err != nil {
			return err
		}
		if err := checkCheckpointPath(*ckPath); err != nil {
			return err
		}
	}
	if *resumePath != "" {
		if err := checkpointable("--resume", n.Job()); err != nil {
			return err
		}
		ck, err := readResume(*resumePath)
		if err != nil {
			return err
		}
		if n, err = n.WithResume(ck); err != nil {
			return cli.InputError(fmt.Errorf("--resume: %w", err))
		}
	}
	spec, err := pipeline.LoadFile(*specPath)
	if err != nil {
		return err
	}
	summaryOut := stdout
	var dump *elementWriter
	if *dumpPath != "" {
		if dump, err = openDump(*dumpPath, spec, stdout); err != nil {
			return cli.InputError(err)
		}
		if *dumpPath == "-" {
			summaryOut = stderr // stdout carries the elements
		}
	}
	co := client.Options{Window: *window, ResumeWait: *resumeWait, Logger: warnLogger(stderr), OffloadProfiles: *profiles, OffloadColocation: *colocation}
	if co.ResumeWait == 0 {
		co.ResumeWait = -1 // for ever
	}
	it, existing, c, err := startRead(ctx, cf, co, spec, n)
	if err != nil {
		if dump != nil {
			dump.discard()
		}
		return resumeError(*resumePath, err)
	}
	defer c.Close()
	defer it.Close()
	sum, err := consume(ctx, it, *take, progressTo(*progress, tty, stderr), dump)
	if dump != nil {
		// Before the checkpoint: it must not cover elements the dump
		// does not hold.
		if cerr := dump.close(); err == nil {
			err = cerr
		}
		sum.Dump, sum.Dumped = *dumpPath, dump.elements
	}
	if err != nil {
		return err
	}
	sum.Take, sum.ResumedFrom = *take, *resumePath
	if *ckPath != "" {
		ck, err := it.Checkpoint()
		if err != nil {
			return err
		}
		if err := writeCheckpoint(*ckPath, ck); err != nil {
			return err
		}
		sum.Checkpoint, sum.CheckpointBytes = *ckPath, len(ck)
	}
	if *resumePath != "" {
		existing = nil // replaced by the resumed job, not joined
	}
	sum.Note = readNote(sum, existing, n.Job().Sharding())
	if sum.Note == "" && *resumePath != "" && sum.Elements == 0 && sum.Stopped == "end" {
		sum.Note = "nothing left to read: the checkpoint covered the whole job"
	}
	if *jf.share {
		sctx, cancel := context.WithTimeout(ctx, *cf.timeout)
		if st, err := it.ShareStats(sctx); err == nil {
			sum.Share = &st
		}
		cancel()
	}
	if *jf.coordinated {
		st := it.Stats()
		cs := &coordSummary{Index: *jf.index, Rounds: st.Rounds, FillerRounds: st.FillerRounds, SkippedRounds: st.SkippedRounds, PaddedTokens: sum.padded, Tokens: sum.tokens}
		sum.Coordinated = cs
	}
	if err := it.Close(); err != nil {
		fmt.Fprintf(stderr, "feedmesh read: warning: leaving job %q: %v (the job keeps this reader until its lease expires, or until a --resume from a checkpoint of the job fences it)\n", *job, err)
	}
	if *cf.jsonOut {
		return cli.WriteJSON(summaryOut, sum)
	}
	printReadSummary(summaryOut, sum)
	return nil
}

// warnLogger is read's client log: its warnings (a resumed job that waits
// for other consumers' checkpoints, a node that did not answer) on stderr,
// and the one INFO line of the job's offload and workers decision
// (cli.WithDecisions).
func warnLogger(stderr io.Writer) *slog.Logger {
	return slog.New(cli.WithDecisions(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == client.DecisionKey) {
				return slog.Attr{} // one line per warning, as the command's own
			}
			return a
		}}), slog.LevelWarn))
}

// startRead dials the cluster with client options co and creates, joins
// or resumes the job; it also returns the job of that name that existed
// before, if any.
func startRead(ctx context.Context, cf *clientFlags, co client.Options, spec *pipeline.Spec, opts jobspec.Normalized) (*client.Iterator, *api.JobInfo, *client.Client, error) {
	c, err := cf.dial(ctx, co)
	if err != nil {
		return nil, nil, nil, err
	}
	existing, err := findJob(ctx, c, opts.Name(), *cf.timeout)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	it, err := c.DistributeNormalized(ctx, spec, opts)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	return it, existing, c, nil
}

// consume reads it to the end, or take batches, or until ctx ends
// (SIGINT, SIGTERM: a clean stop, not an error), writing each batch's
// elements to dump (if not nil) and reporting progress to p.
func consume(ctx context.Context, it *client.Iterator, take int64, p progressLine, dump *elementWriter) (readSummary, error) {
	start := time.Now()
	last := start
	var lastBytes, lastBatches int64
	var padded, tokens, n int64
	stopped := "end"
	for {
		if take > 0 && n >= take {
			stopped = "take"
			break
		}
		if ctx.Err() != nil {
			stopped = "interrupted"
			break
		}
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				stopped = "interrupted"
				break
			}
			return readSummary{}, err
		}
		n++
		if dump != nil {
			if err := dump.write(b.Element); err != nil {
				return readSummary{}, err
			}
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
				p.start, s.Batches, s.Rows, float64(s.Batches-lastBatches)/dt, float64(s.Bytes-lastBytes)/dt/1e6, s.Serving, p.end)
			last, lastBytes, lastBatches = time.Now(), s.Bytes, s.Batches
		}
	}
	if p.w != nil && p.end == "" {
		fmt.Fprintln(p.w)
	}
	s := it.Stats()
	per := make(map[string]workerSummary, len(s.Workers))
	for n, ws := range s.Workers {
		per[n] = workerSummary{Batches: ws.Batches, Elements: ws.Elements, CutElements: ws.CutElements, Bytes: ws.Bytes, WireBytes: ws.WireBytes}
	}
	return readSummary{Job: it.Job(), Batches: s.Batches, Elements: s.Rows, Bytes: s.Bytes, WireBytes: s.WireBytes,
		Seconds: time.Since(start).Seconds(), Workers: len(s.Workers), PerWorker: per, padded: padded, tokens: tokens,
		JobState: s.JobState, SplitsLost: s.SplitsLost, NumSplits: s.NumSplits, LossCounted: s.LossCounted, ElementsLost: s.ElementsLost,
		Delivery: s.Delivery, Requeued: requeued(s),
		Orphaned: orphaned(s, stopped), WorkersDropped: s.WorkersDropped, Reconnects: s.Reconnects, Stopped: stopped,
		StallFraction: s.StallFraction, BatchTimeSeconds: s.BatchTimeSeconds, Offload: s.Offload, Warnings: s.Warnings,
		Reorder: s.Reorder, Audit: it.Audit()}, nil
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
func readNote(s readSummary, existing *api.JobInfo, sh jobspec.Sharding) string {
	switch {
	case s.Elements == 0 && existing != nil:
		return fmt.Sprintf("job %q delivered nothing: a job of that name already existed (created %s) and had delivered its data; a job is one run of its dataset, so give a new --job name to read the dataset again",
			s.Job, existing.CreatedAt.Format(time.RFC3339))
	case sh == jobspec.Off && s.Workers > 1:
		return fmt.Sprintf("sharding off: each of the %d workers read the whole dataset, so this is %d copies of it (--sharding dynamic reads it once, split among the workers)", s.Workers, s.Workers)
	case s.Orphaned > 0:
		return fmt.Sprintf("data may be missing: %d splits were held by workers that died after the job's last split was handed out, and no worker was left reading to read them again; what those workers had produced and this consumer had not received is missing (`feedmesh jobs` shows the job as not finished)", s.Orphaned)
	case s.LossCounted && s.ElementsLost > 0:
		return fmt.Sprintf("data lost: %d elements, of %d splits whose workers died or restarted before this reader got all of them (delivery at-most-once: a dead worker's splits are not read again; the default, exactly-once, reads them again); `feedmesh jobs` shows the job's loss",
			s.ElementsLost, s.SplitsLost)
	case s.SplitsLost > 0 && !s.LossCounted:
		return fmt.Sprintf("data lost: %d of the dataset's %d splits were lost (delivery at-most-once: a worker died or restarted while it held them, and what it had not sent of them is not read again; the default, exactly-once, reads them again); `feedmesh jobs` shows the job's loss",
			s.SplitsLost, s.NumSplits)
	case (s.WorkersDropped > 0 || s.Reconnects > 0) && s.Delivery == jobspec.AtMostOnce && !s.LossCounted:
		return fmt.Sprintf("data may be lost: %d workers were declared dead (or restarted) while streaming to this reader and %d streams broke and were reopened; at most once, batches a dead worker had made and not sent, and those on their way on a broken stream, are lost even when no split is counted lost (the default, exactly-once, sends them again)", s.WorkersDropped, s.Reconnects)
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
	cut := false
	for _, ws := range s.PerWorker {
		cut = cut || ws.CutElements > 0
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if cut {
		// A cut job: the nodes shipped elements (CUT of ELEMENTS) for
		// this client to batch; BATCHES are those they made whole.
		fmt.Fprintln(tw, "  WORKER\tBATCHES\tELEMENTS\tCUT\tMB\tMB/s")
	} else {
		fmt.Fprintln(tw, "  WORKER\tBATCHES\tELEMENTS\tMB\tMB/s")
	}
	for _, n := range names {
		ws := s.PerWorker[n]
		fmt.Fprintf(tw, "  %s\t%d\t%d\t", n, ws.Batches, ws.Elements)
		if cut {
			fmt.Fprintf(tw, "%d\t", ws.CutElements)
		}
		fmt.Fprintf(tw, "%.1f\t%.1f\n", float64(ws.Bytes)/1e6, float64(ws.Bytes)/1e6/s.Seconds)
	}
	tw.Flush()
	if c := s.Coordinated; c != nil {
		fmt.Fprintf(w, "coordinated: consumer %d read %d rounds (%d of them fillers, %d skipped), %d padded tokens of which %d real\n",
			c.Index, c.Rounds, c.FillerRounds, c.SkippedRounds, c.PaddedTokens, c.Tokens)
	}
	if s.Batches > 0 {
		fmt.Fprintf(w, "waited for data %.0f %% of the time (%.3g ms a batch over the last 100)\n", 100*s.StallFraction, 1e3*s.BatchTimeSeconds)
	}
	if o := s.Offload; o != nil && o.Cut > 0 {
		fmt.Fprintf(w, "offload %s: %s, cut after %d ops (the workers shipped the CUT elements one by one and this client made the batches of them)\n", o.Requested, o.Mode, o.Cut)
		fmt.Fprintf(w, "  why: %s\n", o.Reason)
	} else if o != nil {
		fmt.Fprintf(w, "offload %s: %s, %d batches prepared here and %d by the nodes (local budget %.2g cores: %s)\n",
			o.Requested, o.Mode, o.LocalBatches, o.RemoteBatches, o.LocalCPUs, o.LocalCPUsFrom)
		fmt.Fprintf(w, "  why: %s\n", o.Reason)
		if p := o.Profile; p != nil {
			fmt.Fprintf(w, "  profile (elements/s): trainer %.4g, this host %.4g, nodes %.4g; predicted %.4g, measured %.4g\n",
				p.Ingest, p.Local, p.Remote, o.Predicted, o.Measured)
		}
	}
	if r := s.Reorder; r != nil {
		fmt.Fprintf(w, "deterministic order: reorder buffer peak %d of %d batches, %d skipped, %d arrived twice or late\n", r.Peak, r.Bound, r.Skipped, r.Duplicates)
	}
	for _, a := range s.Audit {
		verdict := "incomplete (the epoch was not read to its end)"
		switch {
		case a.Complete && a.Match:
			verdict = "matches the layout's digest of the epoch"
		case a.Complete:
			verdict = "DIFFERS from the layout's digest of the epoch " + a.Expected + ": an element was lost or repeated"
		}
		fmt.Fprintf(w, "audit: epoch %d: %d elements, digest %s, %s\n", a.Epoch, a.Elements, a.Digest, verdict)
	}
	if sh := s.Share; sh != nil {
		fmt.Fprintf(w, "sharing: %d batches read from share windows (%d hits, %d produced for this job), %d evicted before this job read them\n",
			sh.Read, sh.Hits, sh.Produced, sh.EvictedBeforeRead)
	}
	switch {
	case s.LossCounted && (s.ElementsLost > 0 || s.SplitsLost > 0):
		final := ""
		if s.JobState != api.JobFinished {
			final = fmt.Sprintf(" so far (the job is %s: the count is final once it has finished)", s.JobState)
		}
		fmt.Fprintf(w, "lost: %d elements%s, of %d splits not read again (at most once: their worker died or restarted)\n", s.ElementsLost, final, s.SplitsLost)
	case s.SplitsLost > 0:
		fmt.Fprintf(w, "lost: %d of %d splits (at most once: their worker died or restarted)\n", s.SplitsLost, s.NumSplits)
	}
	if (s.WorkersDropped > 0 || s.Reconnects > 0) && s.Delivery == jobspec.AtMostOnce && !s.LossCounted {
		fmt.Fprintf(w, "workers dropped: %d declared dead or restarted while streaming; streams reopened: %d (at most once: what was on its way is lost too)\n", s.WorkersDropped, s.Reconnects)
	}
	if s.Requeued > 0 {
		fmt.Fprintf(w, "exactly once: %d splits of workers that died were read again elsewhere, without the elements already delivered\n", s.Requeued)
	}
	if s.Orphaned > 0 {
		fmt.Fprintf(w, "not read again: %d splits of workers that died at the end of the job (their undelivered elements are missing)\n", s.Orphaned)
	}
	if s.ResumedFrom != "" {
		fmt.Fprintf(w, "resumed from checkpoint %s\n", s.ResumedFrom)
	}
	switch {
	case s.Stopped == "take":
		fmt.Fprintf(w, "stopped after --take %d batches\n", s.Take)
	case s.Stopped == "interrupted":
		fmt.Fprintf(w, "interrupted: stopped reading after %d batches\n", s.Batches)
	case s.Take > 0:
		fmt.Fprintf(w, "the data ended before --take %d: read %d batches\n", s.Take, s.Batches)
	}
	if s.Dump != "" {
		fmt.Fprintf(w, "dump: %d elements written to %s\n", s.Dumped, s.Dump)
	}
	if s.Checkpoint != "" {
		fmt.Fprintf(w, "checkpoint: %d bytes written to %s (it covers every batch read so far; go on with --resume %s)\n", s.CheckpointBytes, s.Checkpoint, s.Checkpoint)
	}
	for _, warning := range s.Warnings {
		fmt.Fprintln(w, "warning: "+warning)
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

// orphaned is how many splits of dead workers an exactly-once job had not
// read again when the data ended (not when reading stopped early: they
// may still be read).
func orphaned(s client.Stats, stopped string) int64 {
	if s.Exact == nil || stopped != "end" {
		return 0
	}
	return s.Exact.Orphaned
}

// requeued is how many splits an exactly-once job read again.
func requeued(s client.Stats) int64 {
	if s.Exact == nil {
		return 0
	}
	return s.Exact.Requeued
}
