package sharing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// BenchmarkShareFanOut is issue 41's fan-out figure: one in-process worker
// serves C consumers, each of its own sharing job of one spec (the range
// 0..n-1 in batches of 256 int64s), at the transport's default limits. It
// reports, for C = 1 (the baseline) and 256 in one run: the batches per
// second and bytes per second into all consumers together, the p50 and p99
// of a consumer's wait in Next, and the peak of the process's live heap
// (sampled every 10 ms). One iteration reads every job to its end:
//
//	go test -run '^$' -bench ShareFanOut -benchtime 1x ./systemtest/sharing/
func BenchmarkShareFanOut(b *testing.B) {
	for _, consumers := range []int{1, 256} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			for range b.N {
				fanOut(b, consumers)
			}
		})
	}
}

// fanOut runs one measurement with the given consumers.
func fanOut(b *testing.B, consumers int) {
	const n, batch = 256 * 2000, 256
	c := testcluster.Start(b, 1)
	fast := transport.FastConfig()
	cl, err := client.Dial(testutil.Ctx(b, 10*time.Second), c.Node(0).Addr(), client.Options{Transport: &fast, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	spec := jobtest.RangeSpec(n, 256*50, batch)
	its := make([]*client.Iterator, consumers)
	for i := range its {
		it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: fmt.Sprintf("fanout-%d", i), Sharding: client.Off, Share: true})
		if err != nil {
			b.Fatal(err)
		}
		defer it.Close()
		its[i] = it
	}
	stop := sampleHeap()
	start := time.Now()
	waits := make([][]time.Duration, consumers)
	errs := make([]error, consumers)
	var wg sync.WaitGroup
	for i, it := range its {
		wg.Go(func() { waits[i], errs[i] = readWaits(it) })
	}
	wg.Wait()
	d := time.Since(start)
	heap := stop()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	var bytes int64
	for i, w := range waits {
		all = append(all, w...)
		bytes += its[i].Stats().Bytes
		if len(w) != n/batch {
			b.Fatalf("consumer %d read %d batches, want %d", i, len(w), n/batch)
		}
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/d.Seconds(), "batches/s")
	b.ReportMetric(float64(bytes)/d.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1e3, "p99-ms")
	b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(c.Node(0).Transport().Refusals().DataStreams), "refused")
}

// readWaits reads it to its end and returns how long each Next took.
func readWaits(it *client.Iterator) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var w []time.Duration
	for {
		t0 := time.Now()
		_, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return w, nil
		}
		if err != nil {
			return w, fmt.Errorf("job %s after %d batches: %w", it.Job(), len(w), err)
		}
		w = append(w, time.Since(t0))
	}
}

// sampleHeap samples the live heap's objects every 10 ms until the returned
// stop is called, which returns the peak.
func sampleHeap() (stop func() uint64) {
	var (
		peak uint64 // owned by the sampling goroutine until wg.Wait
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}
