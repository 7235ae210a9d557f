package membudget

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

const (
	nodes  = 2
	budget = 32 << 20 // each task's
	// hungry's shuffle buffer would hold 256 records of 1 MiB per node:
	// 8× the budget (512 MiB in this process, both nodes together).
	hungryRecord = 1 << 20
	hungryBuffer = 256
)

// heapWatch samples the process's in-use heap every few milliseconds
// until stopped, keeping the peak.
type heapWatch struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak uint64
}

func watchHeap() *heapWatch {
	h := &heapWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			h.mu.Lock()
			h.peak = max(h.peak, ms.HeapInuse)
			h.mu.Unlock()
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapWatch) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestMemoryHungrySpecFailsAlone (issue 37, item 5): a spec whose shuffle
// buffers 8× the node's task memory budget fails, and its consumer is
// told which op and which budget; a job started beside it on the same
// nodes completes with every element; the process's heap (both nodes
// and the clients) stays within the budgets and a slack, far below what
// the shuffle would have held.
func TestMemoryHungrySpecFailsAlone(t *testing.T) {
	c := testcluster.Start(t, nodes, testcluster.WithConfig(func(_ int, cfg *mesh.Config) {
		cfg.Worker.TaskMemoryBudget = budget
	}))
	cl := jobtest.Dial(t, c, 0)
	base := heapInuse()
	h := watchHeap()

	hungry := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "records", Count: 4 * hungryBuffer, RecordBytes: hungryRecord, SplitSize: 16}))
	hungry.Shuffle(hungryBuffer, 1).Batch(4, false)
	const n = 20000
	fine := jobtest.RangeSpec(n, 500, 0)
	fine.Shuffle(1000, 2).Batch(50, false)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := func(name string) client.JobOptions {
		return client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	}
	fineIt, err := cl.Distribute(ctx, fine, opts("fine"))
	if err != nil {
		t.Fatal(err)
	}
	defer fineIt.Close()
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
		got, fineErr = jobtest.Collect(fineIt, 60*time.Second, nil)
	}()
	var hungryErr error
	hungryBatches := 0
	for {
		b, err := hungryIt.Next(ctx)
		if err != nil {
			hungryErr = err
			break
		}
		hungryBatches++
		b.Release()
	}
	wg.Wait()
	peak := h.end()
	// Both nodes' hungry tasks may hold their budget at once, plus the
	// record each charges over it, plus the garbage the GC has not yet
	// collected (up to as much again at GOGC=100), plus a slack for the
	// other job, the batches in flight and the runtime. Without budgets
	// the shuffles alone would hold 512 MiB.
	const slack = 96 << 20
	limit := base + 2*nodes*(budget+hungryRecord) + slack
	t.Logf("heap in use: %d MiB before, peak %d MiB during; bound %d MiB (shuffles unbounded: +%d MiB)",
		base>>20, peak>>20, limit>>20, nodes*hungryBuffer*hungryRecord>>20)
	if peak > limit {
		t.Fatalf("peak heap in use %d MiB, over the bound of %d MiB", peak>>20, limit>>20)
	}

	if errors.Is(hungryErr, io.EOF) || hungryErr == nil {
		t.Fatalf("the hungry job ended normally after %d batches, want it to fail", hungryBatches)
	}
	for _, want := range []string{"ops[0].shuffle: holds", "over the task's memory budget of ", "--task-memory-budget"} {
		if !strings.Contains(hungryErr.Error(), want) {
			t.Errorf("the hungry job's consumer got %v\nwant it to say %q", hungryErr, want)
		}
	}
	t.Logf("hungry job: %d batches, then: %v", hungryBatches, hungryErr)
	if fineErr != nil {
		t.Fatalf("the job beside it: %v", fineErr)
	}
	if len(got.Counts) != n {
		t.Fatalf("the job beside it delivered %d distinct elements, want %d", len(got.Counts), n)
	}
	for v, k := range got.Counts {
		if v < 0 || v >= n || k != 1 {
			t.Fatalf("the job beside it delivered element %d %d times", v, k)
		}
	}
	// The nodes are up: a job after the failure runs.
	after, err := cl.Distribute(ctx, jobtest.RangeSpec(100, 10, 10), opts("after"))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	d := jobtest.Drain(t, after, 30*time.Second, nil)
	if len(d.Counts) != 100 {
		t.Fatalf("the job after delivered %d elements, want 100", len(d.Counts))
	}
}
