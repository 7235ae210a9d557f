package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

func init() {
	register(cli.Command{Name: "jobs", Summary: "list the cluster's jobs", Run: runJobs})
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
	fmt.Fprintln(tw, "JOB\tSTATE\tSHARDING\tCOMPRESSION\tCONSUMERS\tWORKERS\tEPOCH\tSPLITS leased/finished/lost/total\tSHARE read/hits/produced/evicted\tSTALL batch-ms\tDATASET")
	for _, j := range jobs {
		comp := j.Options.Compression
		if comp == "" {
			comp = "none"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%d/%d/%d/%d\t%s\t%s\t%.12s\n", j.Name, j.State, j.Options.Sharding, comp, len(j.Consumers),
			workersColumn(j), j.Epoch+1, j.Options.Epochs, j.Leased, j.Finished, j.Lost, j.NumSplits, shareColumn(j), stallColumn(j), j.Fingerprint)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, j := range jobs {
		if j.State == api.JobFailed {
			fmt.Fprintf(stdout, "job %s failed: %s\n", j.Name, j.Failure)
		}
		if x := j.Exact; x != nil && x.AtMostOnce && (x.Lost > 0 || j.Lost > 0 || x.Orphaned > 0) {
			fmt.Fprintf(stdout, "job %s lost %d elements%s: %d splits of workers that died or restarted were not read again (at most once; %d of them counted by a census)\n",
				j.Name, x.Lost, lossFinal(j), j.Lost, x.Censused)
		}
		for _, c := range slices.Sorted(maps.Keys(j.Offload)) {
			o := j.Offload[c]
			mode := o.Mode
			if o.Cut > 0 {
				mode = fmt.Sprintf("%s, cut after %d ops", o.Mode, o.Cut)
			}
			fmt.Fprintf(stdout, "job %s consumer %s offload %s: %d batches local, %d remote, stall %.0f%%, predicted %.4g measured %.4g elements/s: %s\n",
				j.Name, c, mode, o.Local, o.Remote, 100*o.Stall, o.Predicted, o.Measured, o.Reason)
		}
		if sc := j.Scale; sc != nil {
			fmt.Fprintf(stdout, "job %s autoscaling: %d workers wanted, %s (%d changes): %s\n", j.Name, sc.Wanted, sc.Phase, sc.Changes, sc.Reason)
			if sc.Allocation != "" {
				fmt.Fprintf(stdout, "job %s allocation: %d nodes (%s)\n", j.Name, sc.Share, sc.Allocation)
			}
		}
		for _, a := range j.Autocache {
			fmt.Fprintf(stdout, "job %s %s\n", j.Name, autocacheLine(a))
		}
	}
	if len(jobs) > 0 {
		fmt.Fprintf(stdout, "nodes wanted by the jobs: %d\n", api.NodesWanted(jobs))
	}
	return nil
}

// lossFinal says whether an at-most-once job's loss count is final.
func lossFinal(j api.JobInfo) string {
	if j.State == api.JobRunning {
		if x := j.Exact; x != nil && x.Orphaned > 0 {
			return fmt.Sprintf(" so far (%d splits of dead workers still to count)", x.Orphaned)
		}
		return " so far"
	}
	return ""
}

// autocacheLine says what an autocache point does and, once decided, why.
func autocacheLine(a api.AutocacheInfo) string {
	s := fmt.Sprintf("autocache ops[%d] (mode %s, prefix %.12s): %s", a.Op, a.Mode, a.Prefix, a.Decided())
	if d := a.Decision; d != nil {
		s += fmt.Sprintf("; decided by %s for job %s after %d elements: per %d elements compute %.3gs, cache read %.3gs (%.0f bytes/element at %.1f MB/s)",
			d.Worker, d.Job, d.Elements, d.N, d.ComputeSeconds, d.ReadSeconds, d.BytesPerElement, d.ReadBytesPerSec/1e6)
	}
	return s
}

// workersColumn is the WORKERS column of `feedmesh jobs`: the job's
// choice (auto, all or a count), then the workers serving it, then those
// expired and those drained (stopped gracefully: their next process
// rejoins) or dismissed (autoscaling gave them back).
func workersColumn(j api.JobInfo) string {
	if w := j.Options.Workers; w != "" {
		return string(w) + ":" + workerCounts(j) // one field: scripts split the table on blanks
	}
	return workerCounts(j)
}

func workerCounts(j api.JobInfo) string {
	live, expired, drained, dismissed := 0, 0, 0, 0
	for _, w := range j.Workers {
		switch {
		case w.Expired:
			expired++
		case w.Dismissed:
			dismissed++
		case w.Drained:
			drained++
		default:
			live++
		}
	}
	if dismissed > 0 {
		return fmt.Sprintf("%d (%d expired, %d drained, %d dismissed)", live, expired, drained, dismissed)
	}
	if drained > 0 {
		return fmt.Sprintf("%d (%d expired, %d drained)", live, expired, drained)
	}
	return fmt.Sprintf("%d (%d expired)", live, expired)
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

// stallColumn is the STALL column of `feedmesh jobs`: the consumers' mean
// share of time waiting for data and mean time per batch over their last
// 100 batches, as their heartbeats last reported; "-" before any.
func stallColumn(j api.JobInfo) string {
	if len(j.ConsumerMetrics) == 0 {
		return "-"
	}
	var stall, batch float64
	for _, m := range j.ConsumerMetrics {
		stall += m.Stall
		batch += m.BatchTimeSeconds
	}
	n := float64(len(j.ConsumerMetrics))
	return fmt.Sprintf("%.0f%% %.3g", 100*stall/n, 1e3*batch/n)
}
