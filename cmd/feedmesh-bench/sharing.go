package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	registerBench(cli.Command{Name: "sharing", Summary: "k concurrent jobs of one pipeline with ephemeral sharing on vs off: per-job throughput and preprocessing work vs k = 1", Run: benchSharing})
}

// sharingRun is what one (k, share) run measured.
type sharingRun struct {
	perJob   float64 // mean over the jobs of rows delivered / the job's time
	work     int64   // rows the workers' pipelines produced, all jobs together
	rows     int64   // rows delivered to all jobs
	duration time.Duration
	evicted  int64
}

func benchSharing(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("sharing", "[--jobs 1,2,4,8,16] [--json]", stderr)
	jobsFlag := fs.String("jobs", "1,2,4,8,16", "concurrent job counts k to measure")
	nodes := fs.Int("nodes", 2, "in-process nodes (all workers)")
	elements := fs.Int64("elements", 2048, "dataset size (range source), read once per job")
	splitSize := fs.Int64("split-size", 64, "elements per split")
	batchSize := fs.Int64("batch", 16, "batch size")
	sleepUs := fs.Int64("sleep-us", 2000, "cost op: time each element waits, so production is the bottleneck, not the CPU (short sleeps measure Go timer slack more than sharing)")
	cpuUs := fs.Int64("cpu-us", 0, "cost op: CPU each element burns instead of sleeping (then k unshared jobs compete for the cores)")
	sharding := fs.String("sharding", "dynamic", "off or dynamic (off: every worker runs the whole dataset for each job)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: jobs, share, per_job_rows_per_s, per_job_throughput_ratio, work_rows, work_ratio, seconds, evicted")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var ks []int
	for _, p := range cli.SplitList(*jobsFlag) {
		k, err := strconv.Atoi(p)
		if err != nil || k < 1 || k > 64 {
			return fmt.Errorf("--jobs: %q is not a count from 1 to 64", p)
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 || ks[0] != 1 {
		ks = append([]int{1}, ks...) // ratios are to k = 1 of the same run
	}
	if *cpuUs > 0 {
		*sleepUs = 0
	}
	if *sharding != string(client.Off) && *sharding != string(client.Dynamic) {
		return fmt.Errorf("--sharding: %q is not off or dynamic", *sharding)
	}
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: *elements, SplitSize: *splitSize}})
	spec.Cost(*cpuUs, *sleepUs)
	spec.Batch(*batchSize, false)

	fmt.Fprintf(stderr, "starting %d in-process nodes …\n", *nodes)
	c, cleanup, err := jobsCluster(ctx, *nodes)
	if err != nil {
		return err
	}
	defer cleanup()
	var rows []benchRow
	for _, share := range []bool{true, false} {
		var base sharingRun
		for _, k := range ks {
			r, err := sharingOnce(ctx, c, spec, client.Sharding(*sharding), share, k)
			if err != nil {
				return err
			}
			if k == 1 {
				base = r
			}
			fmt.Fprintf(stderr, "  share=%-5v k=%2d: %6.0f rows/s per job, work %7d rows, %5.2f s, evicted %d\n",
				share, k, r.perJob, r.work, r.duration.Seconds(), r.evicted)
			rows = append(rows, benchRow{
				"jobs": k, "share": share, "per_job_rows_per_s": r.perJob,
				"per_job_throughput_ratio": r.perJob / base.perJob,
				"work_rows":                r.work, "work_ratio": float64(r.work) / float64(base.work),
				"seconds": r.duration.Seconds(), "evicted": r.evicted,
			})
		}
	}
	return printRows(stdout, *jsonOut, []string{"jobs", "share", "per_job_rows_per_s", "per_job_throughput_ratio", "work_rows", "work_ratio", "seconds", "evicted"}, rows)
}

// sharingOnce runs k jobs of spec at once, each with its own client, each
// reading to the end, and returns what they got and what it cost.
func sharingOnce(ctx context.Context, c *localcluster.Cluster, spec *pipeline.Spec, sh client.Sharding, share bool, k int) (sharingRun, error) {
	work0 := clusterWorkRows(c)
	rates := make([]float64, k)
	got := make([]int64, k)
	evicted := make([]int64, k)
	errs := make([]error, k)
	start := time.Now()
	var wg sync.WaitGroup
	for j := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := benchClient(ctx, c, j%c.N())
			if err != nil {
				errs[j] = err
				return
			}
			defer cl.Close()
			t0 := time.Now()
			it, err := cl.Distribute(ctx, spec, client.JobOptions{
				Name: fmt.Sprintf("sharing-%v-k%d-%d-%d", share, k, j, start.UnixNano()), Sharding: sh, Share: share, Workers: client.AllWorkers, Offload: client.OffloadRemote, GCAfter: 200 * time.Millisecond,
			})
			if err != nil {
				errs[j] = err
				return
			}
			defer it.Close()
			if err := drainAll(ctx, it); err != nil {
				errs[j] = err
				return
			}
			got[j] = it.Stats().Rows
			rates[j] = float64(got[j]) / time.Since(t0).Seconds()
			if share {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if st, err := it.ShareStats(sctx); err == nil {
					evicted[j] = st.EvictedBeforeRead
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sharingRun{}, err
	}
	r := sharingRun{duration: time.Since(start), work: clusterWorkRows(c) - work0}
	for j := range k {
		r.perJob += rates[j] / float64(k)
		r.rows += got[j]
		r.evicted += evicted[j]
	}
	return r, waitIdle(c)
}

// clusterWorkRows sums the rows every node's pipelines produced so far.
func clusterWorkRows(c *localcluster.Cluster) int64 {
	var n int64
	for _, i := range c.Running() {
		n += c.Node(i).Work().Rows
	}
	return n
}
