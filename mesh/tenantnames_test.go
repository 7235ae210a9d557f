package mesh_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// dialAs connects a client (the real one, with its heartbeats, data
// streams and local worker) to addr with a client certificate of tenant.
func dialAs(t *testing.T, p *testPKI, addr, name, tenant string, admin bool) *client.Client {
	t.Helper()
	cert, key := p.issueClient(t, name, tenant, admin)
	tlsCfg, err := transport.ClientTLS(p.caFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, addr, client.Options{TLS: tlsCfg, Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatalf("%s dials %s: %v", name, addr, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestTwoTenantsOneJobName (issue 37, item 2: "job names are per
// tenant"): a job name was cluster-wide, so tenant nlp could not call its
// job "train" while tenant vision had one ("is another tenant's: choose
// another job name"). Now two tenants each create and read their own
// "train" at once, through different nodes, with the real client: each
// is told its job by the name it gave, reads exactly its own dataset's
// elements (exactly once), and lists only its own job; an administrator
// lists both, by their internal names "@vision/train" and "@nlp/train",
// and reads either by that name.
func TestTwoTenantsOneJobName(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	c.WaitLeader(t, 20*time.Second)
	alice := dialAs(t, p, c.Node(0).Addr(), "alice", "vision", false)
	bob := dialAs(t, p, c.Node(1).Addr(), "bob", "nlp", false)
	ops := dialAs(t, p, c.Node(2).Addr(), "ops", "", true)

	const n = 3000
	tenants := []struct {
		who   string
		cl    *client.Client
		start int64 // its dataset is [start, start+n)
	}{{"alice (vision)", alice, 0}, {"bob (nlp)", bob, 100000}}
	opts := client.JobOptions{Name: "train", Sharding: client.Dynamic, Delivery: client.ExactlyOnce, Workers: client.AllWorkers, Offload: client.OffloadRemote}
	its := make([]*client.Iterator, len(tenants))
	var wg sync.WaitGroup
	errs := make([]error, len(tenants))
	for i, tn := range tenants {
		wg.Add(1)
		go func() { // both create their "train" at once
			defer wg.Done()
			spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: tn.start, Stop: tn.start + n, SplitSize: 100}})
			spec.Batch(50, false)
			its[i], errs[i] = tn.cl.Distribute(context.Background(), spec, opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s creates its job train: %v", tenants[i].who, err)
		}
		defer its[i].Close()
		if its[i].Job() != "train" {
			t.Errorf("%s's job is named %q, want train", tenants[i].who, its[i].Job())
		}
	}
	ds := jobtest.CollectAll(t, its, nil, nil)
	for i, tn := range tenants {
		d := ds[i]
		if len(d.Counts) != n {
			t.Errorf("%s read %d distinct elements, want %d", tn.who, len(d.Counts), n)
		}
		for v, k := range d.Counts {
			if v < tn.start || v >= tn.start+n || k != 1 {
				t.Errorf("%s read element %d %d times: want each of [%d, %d) once, nothing else", tn.who, v, k, tn.start, tn.start+n)
				break
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listed := func(cl *client.Client) []string {
		t.Helper()
		js, err := cl.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.Tenant+" "+j.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		who  string
		cl   *client.Client
		want []string
	}{
		{"alice", alice, []string{"vision train"}},
		{"bob", bob, []string{"nlp train"}},
		{"an administrator", ops, []string{"nlp @nlp/train", "vision @vision/train"}},
	} {
		if got := listed(tc.cl); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists jobs %q, want %q", tc.who, got, tc.want)
		}
	}
	// The administrator addresses either by its internal name; a tenant
	// cannot.
	for _, name := range []string{"@vision/train", "@nlp/train"} {
		if info, err := ops.Job(ctx, name); err != nil || info.Name != name {
			t.Errorf("an administrator's job.get of %s: named %q, %v", name, info.Name, err)
		}
	}
	for _, tn := range tenants {
		if info, err := tn.cl.Job(ctx, "train"); err != nil || info.Name != "train" {
			t.Errorf("%s's job.get of train: named %q, %v", tn.who, info.Name, err)
		}
	}
	if _, err := bob.Distribute(ctx, jobtest.RangeSpec(10, 10, 5), client.JobOptions{Name: "@vision/train", Sharding: client.Dynamic, Offload: client.OffloadRemote}); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("bob attaches to @vision/train: %v, want permission_denied", err)
	}
	// Every replica holds the two jobs under their internal names.
	want := []string{"@nlp/train", "@vision/train"}
	c.WaitFor(t, 10*time.Second, "every replica to hold "+strings.Join(want, " and "), func() bool {
		for i := range 3 {
			var names []string
			for _, j := range c.Node(i).LocalJobs() {
				names = append(names, j.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, want) {
				return false
			}
		}
		return true
	})
}
