package jobtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/quictest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// Alive reports whether the leader lists node i alive.
func Alive(c *testcluster.Cluster, i int) bool { return MemberStatus(c, i) == api.StatusAlive }

// MemberStatus is node i's status as the leader lists it ("" if no leader
// or not listed).
func MemberStatus(c *testcluster.Cluster, i int) string {
	_, l := c.Leader()
	if l == nil {
		return ""
	}
	for _, m := range l.Members() {
		if m.Name == c.Name(i) {
			return m.Status
		}
	}
	return ""
}

// JobInfo is the job as `feedmesh jobs` lists it.
func JobInfo(t *testing.T, cl *client.Client, name string) (api.JobInfo, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		t.Logf("jobs: %v", err)
		return api.JobInfo{}, false
	}
	for _, j := range jobs {
		if j.Name == name {
			return j, true
		}
	}
	return api.JobInfo{}, false
}

// Serving counts an autoscaling job's workers that serve it (neither
// expired nor released) and those released, and returns its scale info.
func Serving(t *testing.T, ctx context.Context, cl *client.Client, job string) (active, released int, sc api.ScaleInfo) {
	t.Helper()
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name != job || j.Scale == nil {
			continue
		}
		for _, w := range j.Workers {
			switch {
			case w.Expired:
			case w.Dismissed:
				released++
			default:
				active++
			}
		}
		return active, released, *j.Scale
	}
	t.Fatalf("no autoscaling job %q", job)
	return
}

// SharedWork sums the batches the nodes' shared productions computed, and
// all the batches they computed.
func SharedWork(c *testcluster.Cluster) (shared, all int64) {
	for _, i := range c.Running() {
		w := c.Node(i).Work()
		shared += w.SharedBatches
		all += w.Batches
	}
	return shared, all
}

// DumpJobOnFailure logs, when the test has failed, the named job as the
// first running node's replicated state holds it (leases, exactly-once
// bookkeeping, workers, consumers), and the iterator's counters: what a
// hang needs to be understood. Defer it after the iterator's Close, so
// that it runs first, while the consumer is still attached.
func DumpJobOnFailure(t *testing.T, c *testcluster.Cluster, job string, it *client.Iterator) {
	if !t.Failed() {
		return
	}
	if it != nil {
		t.Logf("iterator stats at failure: %+v", it.Stats())
	}
	for _, i := range c.Running() {
		v, ok := c.Node(i).Raft().Job(job)
		if !ok {
			t.Logf("%s: job %q not in its state", c.Name(i), job)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Logf("%s: job %q: %v", c.Name(i), job, err)
			continue
		}
		t.Logf("%s's state of job %q at failure: %s", c.Name(i), job, b)
		return
	}
}

// RawCall sends one control request to addr as a client would (the
// client's default TLS, a transport of its own), and returns its error
// (nil if it succeeded).
func RawCall(t *testing.T, addr, method string, req any) error {
	t.Helper()
	tlsConf, err := transport.ClientTLS("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	n := quictest.Start(t, quictest.Options{ClientOnly: true, ClientTLS: tlsConf})
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return transport.Call(ctx, n.T, n.Codec, addr, method, req, nil)
}
