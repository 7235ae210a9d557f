package sharing

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// The fan-out case of issue 41 at the transport's default limits: one
// worker serves 256 jobs sharing one spec, each read by its own consumer
// (StreamsPerWorker = 2: 512 data streams from one address). Every job gets
// the whole dataset, and the worker refuses no connection or data stream
// (MaxDataStreams 2048, MaxDataStreamsPerAddr 1024).
func TestShareFanOut256AtDefaultLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("256 consumers")
	}
	c := testcluster.Start(t, 1)
	// The client's defaults (a heartbeat a second per consumer), not
	// jobtest.Dial's 100 ms: 256 consumers heartbeating ten times a second
	// over one connection go over MaxRPCStreamsPerConn (64).
	fast := transport.FastConfig()
	cl, err := client.Dial(testutil.Ctx(t, 10*time.Second), c.Node(0).Addr(), client.Options{Transport: &fast, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n, batch, k = 1000, 10, 256
	start := time.Now()
	its := distributeK(t, cl, jobtest.RangeSpec(n, 50, batch), "fanout", k, client.JobOptions{Sharding: client.Off, Share: true})
	tr := c.Node(0).Transport()
	var (
		mu   sync.Mutex
		peak int
	)
	ds := jobtest.CollectAll(t, its, nil, func(int) {
		mu.Lock()
		defer mu.Unlock()
		peak = max(peak, tr.DataStreams())
	})
	t.Logf("%d consumers read %d elements each in %s; data streams at the worker when the first jobs ended: %d; refusals %+v",
		k, n, time.Since(start).Round(time.Millisecond), peak, tr.Refusals())
	for i, d := range ds {
		jobtest.CheckExactly(t, d, n, 1)
		noDuplicatesPerWorker(t, its[i].Job(), d)
	}
	if rf := tr.Refusals(); rf.Conns != 0 || rf.DataStreams != 0 {
		t.Errorf("the worker refused %+v serving %d consumers at its default limits", rf, k)
	}
	waitWindowsReleased(t, c)
}

// A worker at its MaxDataStreams refuses a consumer's further streams; the
// consumer reads on through the streams it was served and retries the
// others: the job is delivered whole, and the refusals are counted.
func TestRefusedDataStreamsDoNotFailTheJob(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(_ int, cfg *mesh.Config) {
		cfg.Transport.MaxDataStreams = 2
	}))
	fast := transport.FastConfig()
	logs := &lockedBuffer{}
	cl, err := client.Dial(testutil.Ctx(t, 10*time.Second), c.Node(0).Addr(), client.Options{Transport: &fast, StreamsPerWorker: 4,
		OffloadColocation: client.OffloadColocationIgnore, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 2000
	its := distributeK(t, cl, jobtest.SlowSpec(n, 50, 10, 200), "refused", 1, client.JobOptions{Sharding: client.Off})
	d := jobtest.CollectAll(t, its, nil, nil)[0]
	jobtest.CheckExactly(t, d, n, 1)
	rf := c.Node(0).Transport().Refusals()
	t.Logf("refusals: %+v", rf)
	if rf.DataStreams == 0 {
		t.Error("a consumer of 4 streams per worker was refused none at MaxDataStreams 2")
	}
	if !strings.Contains(logs.String(), transport.ErrStreamRefused.Error()) {
		t.Errorf("the client logged no %q; its log:\n%s", transport.ErrStreamRefused, logs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
