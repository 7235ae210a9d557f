package delivery

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/internal/testutil/quictest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// TestStolenJobNameStreamsNothing (issue 37, item 3): knowing a job's
// name was enough to attach and steal its batches (the victim ended with
// 2,920 of 3,000 elements, and the cluster reported all delivered). Here
// the thief knows the job's name and its consumer's id (`feedmesh jobs`
// lists both) and, while the victim reads, opens stream after stream as
// that consumer at every worker: without the consumer's capability it
// gets no batch, each stream refused as not allowed, and the victim reads
// the dataset exactly once.
func TestStolenJobNameStreamsNothing(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n = 3000
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(n, 100, 10, 300), client.JobOptions{Name: "victim", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := jobtest.JobInfo(t, cl, "victim")
	if !ok || len(info.Consumers) != 1 {
		t.Fatalf("the job's consumers: %+v", info.Consumers)
	}
	tlsConf, err := transport.ClientTLS("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	thief := quictest.Start(t, quictest.Options{ClientOnly: true, ClientTLS: tlsConf})
	var stolen, refused atomic.Int64
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tctx.Err() == nil {
				r, err := batch.OpenConfig(tctx, thief.T, thief.Codec, c.Node(i).Addr(),
					batch.OpenRequest{Job: "victim", Consumer: info.Consumers[0], Window: 8, JobID: info.ID}, batch.ReceiverConfig{})
				if err != nil {
					continue
				}
				for {
					if _, _, err := r.Next(tctx); err != nil {
						if strings.Contains(err.Error(), "not allowed") {
							refused.Add(1)
						}
						break
					}
					stolen.Add(1)
				}
				r.Close()
			}
		}()
	}
	d := jobtest.Drain(t, it, 120*time.Second, nil)
	stop()
	wg.Wait()
	jobtest.CheckExactly(t, d, n, 1)
	if s := stolen.Load(); s != 0 {
		t.Errorf("the thief read %d batches of the victim's job", s)
	}
	if refused.Load() == 0 {
		t.Error("no stream of the thief was refused as not allowed: it never reached a worker")
	}
	t.Logf("the thief's streams refused: %d; the victim read %d batches", refused.Load(), d.Batches)
}
