package client

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client/offload"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

func TestShareGateRules(t *testing.T) {
	for _, tc := range []struct {
		local, remote int64
		f             float64
		busy, on      bool
		take, receive bool
	}{
		{0, 0, 0.5, true, true, true, true},
		{10, 0, 0.5, true, true, false, true},  // local ahead: it waits, the nodes go on
		{0, 10, 0.5, true, true, true, false},  // nodes ahead: they wait
		{0, 10, 0.5, false, true, true, true},  // the local worker has nothing to read: nodes go on
		{10, 0, 0.5, true, false, true, true},  // no node serves: the local worker goes on
		{100, 0, 1, true, true, true, true},    // local: never held
		{0, 100, 0, true, true, true, true},    // remote: the nodes never held
		{30, 70, 0.3, true, true, true, true},  // on share, within slack
		{40, 60, 0.3, true, true, false, true}, // over its share
	} {
		if got := mayTake(tc.local, tc.remote, tc.f, 2, tc.on); got != tc.take {
			t.Errorf("%+v: mayTake %v", tc, got)
		}
		if got := mayReceive(tc.local, tc.remote, tc.f, 2, tc.busy); got != tc.receive {
			t.Errorf("%+v: mayReceive %v", tc, got)
		}
	}
	// One side may always go on (the shares of the slack add up to it).
	for l := int64(0); l < 50; l++ {
		for r := int64(0); r < 50; r++ {
			for _, f := range []float64{0.1, 0.3, 0.5, 0.9} {
				if !mayTake(l, r, f, 2, true) && !mayReceive(l, r, f, 2, true) {
					t.Fatalf("both held at local %d, remote %d, fraction %v", l, r, f)
				}
			}
		}
	}
}

// A gate set free (auto's "shared by capacity") holds neither side, however
// far one runs ahead of the share it records; set again, it holds.
func TestShareGateFree(t *testing.T) {
	g := newFractionGate(0.5, 2, func() bool { return true }, nil)
	g.Busy(true)
	g.setFree(0.9)
	g.add(false, 100) // the nodes far ahead of their 10 %
	if !g.Open() {
		t.Fatal("free gate held the local worker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := g.waitRemote(ctx); err != nil {
		t.Fatalf("free gate held the nodes: %v", err)
	}
	g.add(true, 1000) // the local worker far ahead of its 90 %
	if !g.Open() {
		t.Fatal("free gate held the local worker")
	}
	if _, _, f := g.counts(); f != 0.9 {
		t.Fatalf("free gate records fraction %v, want 0.9", f)
	}
	g.set(0.5)
	g.add(true, 10)
	if g.Open() {
		t.Fatal("gate set to 0.5 again let the local worker run 10 batches ahead")
	}
}

func TestSpareCPUs(t *testing.T) {
	a, err := parseCPULine("cpu  100 0 100 700 100 0 0 0 0 0")
	if err != nil || a.total != 1000 || a.idle != 800 {
		t.Fatalf("%+v %v", a, err)
	}
	b := cpuTimes{idle: a.idle + 50, total: a.total + 200}
	if s := spareOf(a, b, 4); s != 1 {
		t.Errorf("4 CPUs idle 25 %%: %v spare, want 1", s)
	}
	if s := spareOf(b, a, 4); s != 0 {
		t.Errorf("clock going back: %v", s)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 x 3 4"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCapacity(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		rows           int64
		elapsed, block time.Duration
		bound, want    float64
	}{
		{100, s, 0, 4, 100},       // never held: what it did
		{100, s, s / 2, 4, 200},   // held half the time: twice
		{100, s, s, 4, 400},       // held all the time: bounded
		{100, s, 2 * s, 20, 2000}, // blocked beyond elapsed: bounded too
		{0, s, 0, 4, 0},           // nothing: 0
		{100, 0, 0, 4, 0},         // no time: 0
		{50, 2 * s, 1500 * time.Millisecond, 20, 100},
	} {
		if got := capacity(tc.rows, tc.elapsed, tc.block, tc.bound); got != tc.want {
			t.Errorf("capacity(%d, %v, %v, %v) = %v, want %v", tc.rows, tc.elapsed, tc.block, tc.bound, got, tc.want)
		}
	}
}

func TestMeasure(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := offloadSnapshot{at: t0}
	b := offloadSnapshot{at: t0.Add(2 * time.Second), rows: 400, localRows: 100, remote: 300, work: time.Second,
		localBlocked: time.Second, remoteBlk: 0}
	p := measure(a, b)
	if p.Rows != 400 || p.Ingest != 400 || p.Local != 100 || p.Remote != 150 || !p.RemoteMeasured {
		t.Fatalf("%+v", p)
	}
	// A loop that takes no time of its own, and no node yet.
	b.work, b.remote = 0, 0
	if p := measure(a, b); p.Ingest != 1e9 || p.RemoteMeasured {
		t.Fatalf("%+v", p)
	}
}

func TestLocalShareOf(t *testing.T) {
	for _, tc := range []struct {
		d    offload.Decision
		want float64
	}{
		{offload.Decision{}, 1},                               // no offload: everything local
		{offload.Decision{Offload: true, Fraction: 0.6}, 0.4}, // the mesh's 60 %
		{offload.Decision{Offload: true, Fraction: 1}, autoMinShare},
		{offload.Decision{Offload: true, Fraction: 0.01}, autoMaxShare},
	} {
		if got := localShareOf(tc.d); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%+v: %v, want %v", tc.d, got, tc.want)
		}
	}
}

// TestOffloadPlanFallbacks: auto falls back to remote, saying why, where
// a fixed mode is an error: a pipeline op this process does not have (an
// op registered only in the node binary), no spare CPU.
func TestOffloadPlanFallbacks(t *testing.T) {
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 10, SplitSize: 5}})
	spec.Map("only-in-the-node-binary", nil, 1)
	plan := func(spec *pipeline.Spec, o JobOptions) (*offloadRun, float64, error) {
		t.Helper()
		n, err := NormalizeJobOptions(o)
		if err != nil {
			t.Fatal(err)
		}
		return offloadPlan(spec, n)
	}
	o := JobOptions{Name: "j", Sharding: Dynamic, LocalCPUs: 1}
	r, frac, err := plan(spec, o)
	if err != nil || r.mode != OffloadRemote || frac != 0 || !strings.Contains(r.reason, "cannot run in the client") {
		t.Fatalf("auto with a node-only op: %+v %v %v", r, frac, err)
	}
	o.Offload = OffloadLocal
	if _, _, err := plan(spec, o); err == nil || !strings.Contains(err.Error(), "cannot run in the client") {
		t.Fatalf("local with a node-only op: %v", err)
	}
	ok := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 10, SplitSize: 5}})
	o = JobOptions{Name: "j", Sharding: Dynamic, LocalCPUs: 0.01}
	if r, _, err := plan(ok, o); err != nil || r.mode != OffloadRemote || !strings.Contains(r.reason, "no spare CPU") {
		t.Fatalf("auto without a budget: %+v %v", r, err)
	}
	o.Sharding = Off
	if r, _, err := plan(ok, o); err != nil || r.mode != OffloadRemote || !strings.Contains(r.reason, "sharding dynamic") {
		t.Fatalf("auto on an OFF job: %+v %v", r, err)
	}
}

func TestRevised(t *testing.T) {
	t0 := time.Unix(100, 0)
	a, b := offloadSnapshot{at: t0}, offloadSnapshot{at: t0.Add(2 * time.Second)}
	prev := OffloadProfile{Ingest: 1000, Local: 500, Remote: 1000, RemoteMeasured: true}
	m := OffloadProfile{Ingest: 900, Local: 60, Remote: 700, RemoteMeasured: true, Rows: 100}
	// Both sides ran unhindered: both measured rates are taken.
	if got := revised(prev, m, a, b, 2, 2); got.Local != 60 || got.Remote != 700 || got.Ingest != 900 {
		t.Errorf("unhindered: %+v", got)
	}
	// The local worker was held most of the window: its rate stays.
	hb := b
	hb.localBlocked = 1500 * time.Millisecond
	if got := revised(prev, m, a, hb, 2, 2); got.Local != 500 || got.Remote != 700 {
		t.Errorf("local held: %+v", got)
	}
	// The nodes were held: theirs stays; one of two died: halved.
	hb.remoteBlk = 1500 * time.Millisecond
	if got := revised(prev, m, a, hb, 2, 2); got.Remote != 1000 {
		t.Errorf("nodes held: %+v", got)
	}
	if got := revised(prev, m, a, b, 2, 1); got.Remote != 500 {
		t.Errorf("a node died: %+v", got)
	}
	if got := revised(prev, m, a, b, 1, 2); got.Remote != 2000 {
		t.Errorf("a node joined: %+v", got)
	}
	// A loop measured as taking no time keeps the last ingest rate.
	m.Ingest = 1e9
	if got := revised(prev, m, a, b, 2, 2); got.Ingest != 1000 {
		t.Errorf("ingest: %+v", got)
	}
}

// leasedOut opens the share gate once every split of every epoch is
// leased: the nodes can then deliver no more than they hold, and a local
// worker held to its share would keep the elements it has (a bucket's
// partial batches) for ever. (feedmesh-bench python's dataloader
// workload hung so, once in 4 runs, before.)
func TestLeasedOut(t *testing.T) {
	for _, c := range []struct {
		epochs, splits, leased int64
		want                   bool
	}{
		{1, 122, 121, false},
		{1, 122, 122, true},
		{3, 10, 29, false},
		{3, 10, 30, true},
		{3, 10, 31, true}, // leases again after a death count too
		{-1, 10, 1000, false},
		{1, 0, 0, false},
	} {
		info := api.JobInfo{Options: api.JobOptions{Epochs: c.epochs}, NumSplits: c.splits, Leased: c.leased}
		if got := leasedOut(info); got != c.want {
			t.Errorf("epochs %d, %d splits, %d leased: leasedOut %v, want %v", c.epochs, c.splits, c.leased, got, c.want)
		}
	}
}

// TestOpRates: the per-op profile offload auto remembers comes from the
// local worker's pipeline statistics, op i of the spec being entry i+1
// (the source first); the parallelism is the spec's (what the nodes and a
// cut's suffix run), not the local worker's capped one; an op that has
// not run yet gives no profile.
func TestOpRates(t *testing.T) {
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 100, SplitSize: 10}})
	spec.Map("cost", fn.Args{"sleep_us": 1000}, 4)
	spec.Batch(10, false)
	st := pipeline.Stats{Ops: []pipeline.OpStats{
		{Index: -1, ElementsOut: 100, BytesOut: 800},
		{Index: 0, ElementsIn: 100, ElementsOut: 100, BytesOut: 800, BusySeconds: 0.1},
		{Index: 1, ElementsIn: 100, ElementsOut: 10, BytesOut: 800, BusySeconds: 0.001},
	}}
	got := opRates(spec, st)
	want := []offload.OpRate{{Seconds: 0.001, Parallelism: 4, Bytes: 8}, {Seconds: 0.00001, Parallelism: 1, Bytes: 80}}
	if len(got) != 2 || math.Abs(got[0].Seconds-want[0].Seconds) > 1e-12 || got[0].Parallelism != 4 || got[0].Bytes != 8 ||
		math.Abs(got[1].Seconds-want[1].Seconds) > 1e-12 || got[1].Parallelism != 1 || got[1].Bytes != 80 {
		t.Fatalf("opRates = %+v, want %+v", got, want)
	}
	st.Ops[2].ElementsIn, st.Ops[2].ElementsOut = 0, 0
	if got := opRates(spec, st); got != nil {
		t.Errorf("an op that has not run: %+v", got)
	}
	if got := opRates(spec, pipeline.Stats{Ops: st.Ops[:2]}); got != nil {
		t.Errorf("stats of another pipeline: %+v", got)
	}
}

// TestMoved: a revision's profile is stored again only when a rate or the
// link moved by more than 5 %, or the nodes were measured for the first
// time.
func TestMoved(t *testing.T) {
	a := OffloadProfile{Ingest: 1000, Local: 900, Remote: 60, RemoteMeasured: true, LinkBytesPerSecond: 2e6}
	b := a
	b.Local, b.Ingest = 930, 1200
	if moved(a, b) {
		t.Errorf("3 %% on the local rate (and the loop's, not remembered for this) stored again")
	}
	b.Local = 960
	if !moved(a, b) {
		t.Errorf("7 %% on the local rate not stored")
	}
	c := a
	c.RemoteMeasured = false
	if !moved(c, a) {
		t.Errorf("the nodes measured for the first time not stored")
	}
}
