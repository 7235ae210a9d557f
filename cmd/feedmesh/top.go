package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	register(cli.Command{Name: "top", Summary: "a live view of the cluster's jobs: workers, throughput and the op that bounds each", Run: runTop})
}

// runTop is `feedmesh top [--addr NODE] [--interval D] [--iterations N]`:
// every interval it lists the jobs (through the leader) and asks each
// running job's workers for their tasks' counters (worker.opstats), then
// redraws the view in place on a terminal, or prints frame after frame
// elsewhere.
func runTop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("top", "[--addr host:port] [--interval 1s] [--iterations N]", stderr)
	cf := addConnFlags(fs)
	interval := fs.Duration("interval", time.Second, "time between refreshes")
	iterations := fs.Int("iterations", 0, "stop after this many refreshes (0: until Ctrl-C)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if *interval < 100*time.Millisecond {
		return cli.InputError(fmt.Errorf("--interval %v: want at least 100ms", *interval))
	}
	if *iterations < 0 {
		return cli.InputError(fmt.Errorf("--iterations %d: want 0 or more", *iterations))
	}
	c, err := cf.dial(ctx, perWorkerTimeout(cf))
	if err != nil {
		return err
	}
	defer c.Close()
	tty := isTerminal(stdout)
	prev := map[string]topSample{}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for i := 1; ; i++ {
		frame, err := topFrame(ctx, c, *cf.timeout, prev)
		if err != nil && ctx.Err() == nil {
			frame = fmt.Sprintf("%s  %v\n", time.Now().Format("15:04:05"), err)
		}
		if tty {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
		}
		fmt.Fprint(stdout, frame)
		if *iterations > 0 && i >= *iterations {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends the view, not with an error
		case <-tick.C:
		}
	}
}

// topSample is a job's batch count at a time, for its rate.
type topSample struct {
	at      time.Time
	batches int64
}

// topFrame draws one view of the jobs. prev holds the last sample per job
// and is updated.
func topFrame(ctx context.Context, c *client.Client, timeout time.Duration, prev map[string]topSample) (string, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	jobs, err := c.Jobs(qctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %d jobs\n", time.Now().Format("15:04:05"), len(jobs))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tSHARDING\tWORKERS\tCONSUMERS\tBATCHES\tBATCHES/S\tBOUNDING OP (stall share)\tNOT ANSWERING")
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.Name] = true
		batches, bounding, missing := int64(0), "-", ""
		rate := "-"
		if j.State == api.JobRunning {
			st, err := c.JobOpStats(qctx, j.Name)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
					return "", err
				}
				missing = err.Error()
			} else {
				sum := st.Sum()
				batches = sum.Batches
				bounding = boundingLabel(sum.Stats)
				missing = strings.Join(st.Unreachable, ",")
				now := time.Now()
				// A worker that stopped answering takes its batches out
				// of the sum: no rate then, rather than a negative one.
				if p, ok := prev[j.Name]; ok && now.After(p.at) && batches >= p.batches && len(st.Unreachable) == 0 {
					rate = fmt.Sprintf("%.1f", float64(batches-p.batches)/now.Sub(p.at).Seconds())
				}
				prev[j.Name] = topSample{now, batches}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", j.Name, j.State, j.Options.Sharding, workersColumn(j),
			len(j.Consumers), batches, rate, bounding, missing)
	}
	for name := range prev {
		if !seen[name] {
			delete(prev, name) // bounded by the jobs listed
		}
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// boundingLabel names the op with the most stall and its share of the
// stall over all ops.
func boundingLabel(s pipeline.Stats) string {
	if s.Bounding < 0 || s.Bounding >= len(s.Ops) {
		return "-"
	}
	var total float64
	for _, o := range s.Ops {
		total += max(o.StallSeconds, 0)
	}
	o := s.Ops[s.Bounding]
	share := 0.0
	if total > 0 {
		share = o.StallSeconds / total
	}
	if o.Index >= 0 {
		return fmt.Sprintf("ops[%d] %s (%.0f %%)", o.Index, o.Name, 100*share)
	}
	return fmt.Sprintf("%s (%.0f %%)", o.Name, 100*share)
}
