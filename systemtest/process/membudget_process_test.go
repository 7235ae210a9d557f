package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
)

// vmRSS reads a process's resident set (VmRSS) from /proc/PID/status.
func vmRSS(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// rssWatch samples a process's VmRSS every 10 ms until stopped, keeping
// the peak.
type rssWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	peak       uint64
	samples    int
}

func watchRSS(pid int) *rssWatch {
	w := &rssWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := vmRSS(pid); err == nil {
				w.mu.Lock()
				w.peak, w.samples = max(w.peak, rss), w.samples+1
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *rssWatch) end() (peak uint64, samples int) {
	close(w.stop)
	<-w.done
	return w.peak, w.samples
}

// TestMemoryHungrySpecProcessRSS (issue 37, item 5): a real node process
// (the built binary) with --task-memory-budget 32 is given a spec whose
// shuffle would hold 512 records of 1 MiB (512 MiB); the task fails, its
// consumer told the op and the budget, while the node's resident set
// (/proc/PID/status VmRSS, sampled every 10 ms) stays under its RSS
// before the job + twice the budget and a record (the GC's garbage at
// GOGC=100) + a 96 MiB margin (the job beside it, batches in flight, the
// runtime), and a job beside it and one after it complete.
func TestMemoryHungrySpecProcessRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes a process's RSS no measure of its heap")
	}
	const (
		budgetMiB    = 32
		record       = 1 << 20
		buffer       = 512
		marginMiB    = 96
		elementsFine = 20000
	)
	nodes := startNodesWith(t, 1, func(int, *nodeProcess, []*nodeProcess) []string {
		return []string{"--task-memory-budget", strconv.Itoa(budgetMiB)}
	}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, _ := dialFormed(t, ctx, nodes, 0)
	defer cl.Close()
	pid := nodes[0].cmd.Process.Pid

	opts := func(name string) client.JobOptions {
		return client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	}
	// Warm the node (a first job: its workers, codecs, connections), then
	// take its RSS as the base.
	warm, err := cl.Distribute(ctx, jobtest.RangeSpec(100, 10, 10), opts("warm"))
	if err != nil {
		t.Fatal(err)
	}
	if d := jobtest.Drain(t, warm, 30*time.Second, nil); len(d.Counts) != 100 {
		t.Fatalf("the warm-up job delivered %d elements", len(d.Counts))
	}
	warm.Close()
	base, err := vmRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	w := watchRSS(pid)

	fine := jobtest.RangeSpec(elementsFine, 500, 0)
	fine.Shuffle(1000, 2).Batch(50, false)
	fineIt, err := cl.Distribute(ctx, fine, opts("fine"))
	if err != nil {
		t.Fatal(err)
	}
	defer fineIt.Close()
	hungry := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "records", Count: 2 * buffer, RecordBytes: record, SplitSize: 16}))
	hungry.Shuffle(buffer, 1).Batch(4, false)
	hungryIt, err := cl.Distribute(ctx, hungry, opts("hungry"))
	if err != nil {
		t.Fatal(err)
	}
	defer hungryIt.Close()

	var (
		wg      sync.WaitGroup
		got     jobtest.Delivery
		fineErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, fineErr = jobtest.Collect(fineIt, 90*time.Second, nil)
	}()
	var hungryErr error
	for {
		b, err := hungryIt.Next(ctx)
		if err != nil {
			hungryErr = err
			break
		}
		b.Release()
	}
	wg.Wait()
	peak, samples := w.end()

	limit := base + 2*(budgetMiB<<20+record) + marginMiB<<20
	t.Logf("node RSS: %d MiB before, peak %d MiB (%d samples); bound %d MiB (the shuffle unbounded: +%d MiB)",
		base>>20, peak>>20, samples, limit>>20, buffer*record>>20)
	if peak > limit {
		t.Errorf("node RSS peaked at %d MiB, over the bound of %d MiB", peak>>20, limit>>20)
	}
	if hungryErr == nil || errors.Is(hungryErr, io.EOF) {
		t.Fatalf("the hungry job ended normally, want it to fail")
	}
	for _, want := range []string{"shuffle: holds", "over the task's memory budget of ", "--task-memory-budget"} {
		if !strings.Contains(hungryErr.Error(), want) {
			t.Errorf("the hungry job's consumer got %v\nwant it to say %q", hungryErr, want)
		}
	}
	if fineErr != nil || len(got.Counts) != elementsFine {
		t.Fatalf("the job beside it: %d distinct elements of %d, %v", len(got.Counts), elementsFine, fineErr)
	}
	after, err := cl.Distribute(ctx, jobtest.RangeSpec(100, 10, 10), opts("after"))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if d := jobtest.Drain(t, after, 30*time.Second, nil); len(d.Counts) != 100 {
		t.Fatalf("the job after delivered %d elements, want 100", len(d.Counts))
	}
}
