package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// BenchmarkCheckpointBytes reports the size of a checkpoint of a job over
// 1,000,000 elements (1,000 splits of 1,000, batches of 100) taken after
// half an epoch, by one consumer and by each of two consumers, and in
// epoch 2 of 3 by one consumer.
//
//	go test ./systemtest/delivery -run '^$' -bench CheckpointBytes -benchtime 1x
func BenchmarkCheckpointBytes(b *testing.B) {
	const n = 1_000_000
	spec := func() *pipeline.Spec {
		return pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 1000}}).Batch(100, false)
	}
	c := testcluster.Start(b, 3)
	read := func(it *client.Iterator, batches int, settled int64) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for range batches {
			if _, err := it.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		// A trainer reads for hours; this loop for a second: let the
		// receipts and a heartbeat catch up with what was read, as they
		// would have.
		deadline := time.Now().Add(30 * time.Second)
		for x := it.Stats().Exact; x == nil || x.SettledBefore < settled; x = it.Stats().Exact {
			if time.Now().After(deadline) {
				b.Fatalf("epoch %d not settled after 30 s: %+v", settled-1, x)
			}
			time.Sleep(10 * time.Millisecond) // polling the iterator's stats
		}
		ck, err := it.Checkpoint()
		if err != nil {
			b.Fatal(err)
		}
		return ck
	}
	for i := range b.N {
		cl := jobtest.Dial(b, c, 0)
		it, err := cl.Distribute(context.Background(), spec(), client.JobOptions{Name: fmt.Sprintf("ck1-%d", i), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(read(it, n/100/2, 0))), "bytes-1-consumer-half-epoch")
		it.Close()

		it, err = cl.Distribute(context.Background(), spec(), client.JobOptions{Name: fmt.Sprintf("ck3-%d", i), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 3})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(read(it, n/100*3/2, 1))), "bytes-1-consumer-epoch-2-of-3")
		it.Close()

		o := client.JobOptions{Name: fmt.Sprintf("ck2-%d", i), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
		x, err := cl.Distribute(context.Background(), spec(), o)
		if err != nil {
			b.Fatal(err)
		}
		y, err := jobtest.Dial(b, c, 1).Distribute(context.Background(), spec(), o)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan []byte, 1)
		go func() { done <- read(y, n/100/4, 0) }()
		b.ReportMetric(float64(len(read(x, n/100/4, 0))+len(<-done))/2, "bytes-each-of-2-consumers-half-epoch")
		x.Close()
		y.Close()
	}
}
