package sharing

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// Integration tests of ephemeral sharing (issue 5) on real nodes over QUIC.
// Datasets are ranges, so every element carries its id: completeness and
// duplicates are checked per worker.

// distributeK starts k sharing jobs named prefix-0 … prefix-(k-1).
func distributeK(t *testing.T, cl *client.Client, spec *pipeline.Spec, prefix string, k int, o client.JobOptions) []*client.Iterator {
	t.Helper()
	its := make([]*client.Iterator, k)
	for i := range its {
		o.Name = fmt.Sprintf("%s-%d", prefix, i)
		it, err := cl.Distribute(context.Background(), spec, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { it.Close() })
		its[i] = it
	}
	return its
}

// noDuplicatesPerWorker fails if a worker delivered an element twice.
func noDuplicatesPerWorker(t *testing.T, job string, d jobtest.Delivery) {
	t.Helper()
	for w, vs := range d.ByWorker {
		seen := map[int64]bool{}
		for _, v := range vs {
			if seen[v] {
				t.Fatalf("job %s: worker %s delivered element %d twice", job, w, v)
			}
			seen[v] = true
		}
	}
}

// waitWindowsReleased waits until no node keeps a sharing window.
func waitWindowsReleased(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	c.WaitFor(t, 20*time.Second, "share windows released", func() bool {
		for _, i := range c.Running() {
			if st := c.Node(i).ShareStats(""); st.Windows != 0 || st.Bytes != 0 {
				return false
			}
		}
		return true
	})
}

// Eight jobs of one spec with sharing OFF, read at the same speed: each
// receives the whole dataset from every worker, once, and the workers
// produce it about once in all.
func TestShareEightJobsOff(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n, batch, k = 3000, 10, 8
	its := distributeK(t, cl, jobtest.SlowSpec(n, 20, batch, 300), "sweep-off", k, client.JobOptions{Sharding: client.Off, Share: true})
	ds := jobtest.CollectAll(t, its, nil, nil)
	for i, d := range ds {
		jobtest.CheckExactly(t, d, n, 3) // OFF: every worker runs the whole dataset
		noDuplicatesPerWorker(t, its[i].Job(), d)
	}
	oneJob := int64(3 * n / batch)
	shared, all := jobtest.SharedWork(c)
	t.Logf("%d jobs: workers produced %d shared batches (%d in all); one job needs %d", k, shared, all, oneJob)
	if float64(all) > 1.1*float64(oneJob) {
		t.Errorf("workers produced %d batches for %d sharing jobs; one job needs %d (limit 1.1×)", all, k, oneJob)
	}
	var produced int64
	for _, it := range its {
		st := shareStats(t, it)
		if st.Read != oneJob || st.EvictedBeforeRead != 0 || st.Hits+st.Produced != st.Read {
			t.Errorf("job %s share stats %+v: want %d read, none evicted", it.Job(), st, oneJob)
		}
		if s := it.Stats().Share; s == nil || s.Read != st.Read {
			t.Errorf("job %s: Stats().Share = %+v, want what ShareStats returned", it.Job(), s)
		}
		produced += st.Produced
	}
	if produced != shared {
		t.Errorf("jobs caused %d productions, workers counted %d", produced, shared)
	}
	for _, j := range jobsAnswered(t, cl) {
		if j.Share == nil || j.Share.Read != oneJob || len(j.Share.Workers) != 3 {
			t.Errorf("jobs list: %s share summary %+v, want %d read on 3 workers", j.Name, j.Share, oneJob)
		}
	}
	waitWindowsReleased(t, c)
}

// Eight DYNAMIC jobs of one spec: the share group leases each split once
// for all of them, so each job receives the dataset exactly once and the
// workers produce it once in all.
func TestShareEightJobsDynamic(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n, batch, k = 6000, 10, 8
	its := distributeK(t, cl, jobtest.SlowSpec(n, 20, batch, 300), "sweep-dyn", k, client.JobOptions{Sharding: client.Dynamic, Offload: client.OffloadRemote, Share: true})
	ds := jobtest.CollectAll(t, its, nil, nil)
	for _, d := range ds {
		jobtest.CheckExactly(t, d, n, 1)
	}
	oneJob := int64(n / batch)
	shared, all := jobtest.SharedWork(c)
	t.Logf("%d jobs: workers produced %d shared batches (%d in all); one job needs %d", k, shared, all, oneJob)
	if float64(all) > 1.1*float64(oneJob) {
		t.Errorf("workers produced %d batches for %d sharing jobs; one job needs about %d (limit 1.1×)", all, k, oneJob)
	}
	jobs, err := cl.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != k {
		t.Fatalf("jobs list has %d entries, want the %d jobs (the share group is hidden)", len(jobs), k)
	}
	group := jobs[0].ShareGroup
	for _, j := range jobs {
		if j.ShareGroup == "" || j.ShareGroup != group {
			t.Errorf("job %s in share group %q, want one group %q for all", j.Name, j.ShareGroup, group)
		}
		if j.Finished != j.NumSplits {
			t.Errorf("job %s: %d of %d splits finished", j.Name, j.Finished, j.NumSplits)
		}
	}
	waitWindowsReleased(t, c)
}

// The job whose share group the workers lease under is not special: when
// the first job leaves and is garbage-collected, the other keeps reading
// and gets the whole dataset.
func TestShareDynamicFirstJobLeaves(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n = 4000
	spec := jobtest.SlowSpec(n, 20, 10, 200)
	first, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: "first", Sharding: client.Dynamic, Offload: client.OffloadRemote, Share: true, GCAfter: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	second := distributeK(t, cl, spec, "second", 1, client.JobOptions{Sharding: client.Dynamic, Offload: client.OffloadRemote, Share: true})[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		if _, err := first.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first.Close()
	_, leader := c.WaitLeader(t, 10*time.Second)
	gone := false
	d, err := jobtest.Collect(second, 60*time.Second, func(batches int) {
		if !gone && batches == 20 {
			// Stop reading until "first" is collected: the rest of the
			// dataset is leased after that.
			c.WaitFor(t, 20*time.Second, "first job collected", func() bool {
				_, ok := leader.Raft().Job("first")
				return !ok
			})
			gone = true
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !gone {
		t.Fatal("second job ended before the first was collected")
	}
	jobtest.CheckExactly(t, d, n, 1)
}

// One job stops reading: the others finish without it, and when it
// resumes it reports the batches evicted before it could read them, and
// never receives one twice.
func TestShareThrottledJob(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.Worker.ShareWindowBytes = 32 << 10 // ~200 small batches
	}))
	cl := jobtest.Dial(t, c, 0)
	const n, batch, k = 20000, 10, 4
	its := distributeK(t, cl, jobtest.SlowSpec(n, 100, batch, 20), "throttle", k, client.JobOptions{Sharding: client.Off, Share: true})
	release := make(chan struct{})
	var finished sync.WaitGroup
	finished.Add(k - 1)
	go func() { finished.Wait(); close(release) }()
	holds := make([]func(int), k)
	holds[k-1] = func(batches int) {
		if batches == 1 {
			<-release // the throttled job stops reading until the others are done
		}
	}
	ds := jobtest.CollectAll(t, its, holds, func(i int) {
		if i != k-1 {
			finished.Done()
		}
	})
	for i, d := range ds[:k-1] {
		jobtest.CheckExactly(t, d, n, 3)
		noDuplicatesPerWorker(t, its[i].Job(), d)
	}
	slow := its[k-1]
	noDuplicatesPerWorker(t, slow.Job(), ds[k-1])
	st := shareStats(t, slow)
	t.Logf("throttled job: %d of %d elements, share stats %+v", len(ds[k-1].Counts), n, st)
	if st.EvictedBeforeRead == 0 {
		t.Errorf("throttled job reports no evictions: %+v", st)
	}
	if got := int64(ds[k-1].Batches); got+st.EvictedBeforeRead != int64(3*n/batch) {
		t.Errorf("throttled job read %d batches and missed %d: want %d in all", got, st.EvictedBeforeRead, 3*n/batch)
	}
	for i := range k - 1 {
		if st := shareStats(t, its[i]); st.EvictedBeforeRead != 0 {
			t.Errorf("job %s kept up but reports %d evictions", its[i].Job(), st.EvictedBeforeRead)
		}
	}
}

// Jobs over different datasets never read each other's windows.
func TestShareDifferentSpecsStayApart(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n = 1000
	a := jobtest.SlowSpec(n, 20, 10, 200)
	b := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 1 << 40, Stop: 1<<40 + n, SplitSize: 20}})
	b.Cost(0, 200)
	b.Batch(10, false)
	its := distributeK(t, cl, a, "spec-a", 2, client.JobOptions{Share: true})
	its = append(its, distributeK(t, cl, b, "spec-b", 2, client.JobOptions{Share: true})...)
	ds := jobtest.CollectAll(t, its, nil, nil)
	for i, d := range ds {
		lo := int64(0)
		if i >= 2 {
			lo = 1 << 40
		}
		for v := range d.Counts {
			if v < lo || v >= lo+n {
				t.Fatalf("job %s received element %d of the other dataset", its[i].Job(), v)
			}
		}
		if len(d.Counts) != n {
			t.Errorf("job %s: %d distinct elements, want %d", its[i].Job(), len(d.Counts), n)
		}
	}
}

// A batch larger than the window cannot be shared: the job fails with an
// error that says so and names the knob.
func TestShareBatchLargerThanWindow(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.Worker.ShareWindowBytes = 256
	}))
	cl := jobtest.Dial(t, c, 0)
	it := distributeK(t, cl, jobtest.RangeSpec(1000, 100, 100), "too-large", 1, client.JobOptions{Share: true})[0]
	_, err := jobtest.Collect(it, 30*time.Second, nil)
	if err == nil || !strings.Contains(err.Error(), "larger than the share window") || !strings.Contains(err.Error(), "ShareWindowBytes") {
		t.Fatalf("err = %v, want one saying the batch is larger than the share window", err)
	}
	if _, err := cl.Distribute(context.Background(), jobtest.RangeSpec(10, 1, 1), client.JobOptions{Name: "static-share", Sharding: client.Static, Share: true}); err == nil {
		t.Fatal("sharing with static sharding was accepted")
	}
}

// shareStats is it.ShareStats with an answer from every worker: a stats
// call that fails (a timeout on the loaded, shared machine, say) is made
// again until a deadline.
func shareStats(t *testing.T, it *client.Iterator) api.JobShareSummary {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := it.ShareStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Unreachable) == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: workers %v did not answer share stats", it.Job(), st.Unreachable)
		}
	}
}

// jobsAnswered is cl.Jobs with every sharing job's workers answering for
// its share summary (asked again until a deadline, like shareStats).
func jobsAnswered(t *testing.T, cl *client.Client) []api.JobInfo {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		jobs, err := cl.Jobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, j := range jobs {
			if j.Share != nil {
				missing = append(missing, j.Share.Unreachable...)
			}
		}
		if len(missing) == 0 {
			return jobs
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %v did not answer for the jobs' share summaries", missing)
		}
	}
}
