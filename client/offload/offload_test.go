package offload

import (
	"math"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		name string
		p    Profile
		want func(Decision) bool
	}{
		{"no stall: everything local", Profile{Ingest: 100, Local: 200, Candidates: []Candidate{{Cut: 1, Remote: 1000}}},
			func(d Decision) bool { return !d.Offload && d.Predicted == 100 }},
		{"a stall below the speed-up threshold: local", Profile{Ingest: 105, Local: 100, Candidates: []Candidate{{Cut: 1, Remote: 1000}}},
			func(d Decision) bool { return !d.Offload }},
		{"remote faster, plenty of bandwidth: mostly remote", Profile{Ingest: 1000, Local: 100, Candidates: []Candidate{{Cut: 2, Remote: 2000, OverheadRatio: 0.05}}},
			func(d Decision) bool {
				return d.Offload && !d.Capacity && d.Cut == 2 && d.Fraction >= 0.9 && d.Predicted == 1000
			}},
		{"a stall, but the mesh adds less than the threshold (a slow link): local", Profile{Ingest: 4000, Local: 936, Candidates: []Candidate{{Cut: 2, Remote: 61, OverheadRatio: 0.05}}},
			func(d Decision) bool {
				return !d.Offload && d.Predicted == 936 && strings.Contains(d.Reason, "does not pay")
			}},
		{"neither side alone: shared by capacity", Profile{Ingest: 1000, Local: 300, Candidates: []Candidate{{Cut: 1, Remote: 200, OverheadRatio: 0.1}}},
			func(d Decision) bool {
				return d.Offload && d.Capacity && d.Fraction > 0.35 && d.Fraction < 0.45 && strings.Contains(d.Reason, "shared by capacity")
			}},
	} {
		d, err := Decide(tc.p, c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !tc.want(d) {
			t.Errorf("%s: %+v", tc.name, d)
		}
	}
	if _, err := Decide(Profile{Ingest: 100, Local: 10}, c); err == nil {
		t.Error("a stall with no candidate decided something")
	}
	for _, bad := range []Profile{{Ingest: 0, Local: 1}, {Ingest: 1, Local: -1}, {Ingest: 10, Local: 1, Candidates: []Candidate{{Cut: 0, Remote: 5}}}} {
		if _, err := Decide(bad, c); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// A slow link and a pipeline whose first op shrinks the data (a decode
// and crop: 500 KB in, 50 KB out) then a cheap augmentation: shipping
// the raw elements is link-bound, shipping after the shrinking op is not,
// so the cut goes after it (a partial offload), and the host does the rest.
func TestEstimateSlowLinkPartialOffload(t *testing.T) {
	ops := []OpCost{
		{CPUSeconds: 0.000, Bytes: 500e3}, // read: raw JPEG bytes
		{CPUSeconds: 0.020, Bytes: 50e3},  // decode + crop: expensive, shrinks
		{CPUSeconds: 0.002, Bytes: 50e3},  // augment: cheap
	}
	env := Env{Ingest: 400, LocalCores: 2, RemoteCores: 16, LinkBytesPerSecond: 12.5e6, ReceiveSecondsPerByte: 2e-9, SourceBytes: 500e3}
	p, err := Estimate(ops, env)
	if err != nil {
		t.Fatal(err)
	}
	if p.Local > 100 || len(p.Candidates) != 3 {
		t.Fatalf("profile %+v", p)
	}
	if r := p.Candidates[0].Remote; r > 26 { // 12.5 MB/s over 500 KB
		t.Errorf("cutting after the read ships 500 KB an element: %v elements/s, want the link's 25", r)
	}
	d, err := Decide(p, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !d.Offload || d.Cut < 2 || d.Predicted <= 2*p.Local {
		t.Errorf("decision %+v on %+v: want a cut after the shrinking op (2 or later) and more than twice the host alone", d, p)
	}
	// With a fast link the same pipeline is cut the same way or later,
	// never before the shrinking op.
	env.LinkBytesPerSecond = 10e9
	p, _ = Estimate(ops, env)
	if d, _ := Decide(p, DefaultConfig()); !d.Offload || d.Cut < 2 {
		t.Errorf("fast link: %+v", d)
	}
	// No stall: the host keeps up alone, no remote worker.
	env.Ingest = 50
	p, _ = Estimate(ops, env)
	if d, _ := Decide(p, DefaultConfig()); d.Offload {
		t.Errorf("no stall: %+v", d)
	}
}

// Measurements that move within the hysteresis do not flip a decision;
// a real change does.
func TestReviseHysteresis(t *testing.T) {
	c := DefaultConfig()
	base := Profile{Ingest: 1000, Local: 300, Candidates: []Candidate{{Cut: 1, Remote: 400, OverheadRatio: 0.1}, {Cut: 2, Remote: 380, OverheadRatio: 0.1}}}
	d, err := Decide(base, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, noise := range []float64{0.97, 1.02, 0.99, 1.03, 0.98} {
		p := base
		p.Candidates = []Candidate{{Cut: 1, Remote: 400 * noise, OverheadRatio: 0.1}, {Cut: 2, Remote: 380 / noise, OverheadRatio: 0.1}}
		p.Local = 300 * noise
		got, err := Revise(d, p, c)
		if err != nil {
			t.Fatal(err)
		}
		if got != d {
			t.Fatalf("noise %.2f flipped %+v to %+v", noise, d, got)
		}
	}
	// The remote side doubles: the decision moves.
	p := base
	p.Candidates = []Candidate{{Cut: 1, Remote: 800, OverheadRatio: 0.1}}
	got, err := Revise(d, p, c)
	if err != nil {
		t.Fatal(err)
	}
	if got == d || got.Fraction <= d.Fraction {
		t.Errorf("the mesh doubled: %+v → %+v", d, got)
	}
}

// A decision held to a share and one that runs both sides at capacity
// differ even at a similar fraction: Revise switches between them.
func TestReviseCapacityFlip(t *testing.T) {
	c := DefaultConfig()
	// The mesh covers the host's shortfall: held to its share.
	held, err := Decide(Profile{Ingest: 1000, Local: 400, Candidates: []Candidate{{Cut: 1, Remote: 640, OverheadRatio: 0.05}}}, c)
	if err != nil || !held.Offload || held.Capacity {
		t.Fatalf("%+v %v", held, err)
	}
	// The mesh slows to just under the shortfall: both now run at
	// capacity, at about the same fraction.
	got, err := Revise(held, Profile{Ingest: 1000, Local: 400, Candidates: []Candidate{{Cut: 1, Remote: 620, OverheadRatio: 0.05}}}, c)
	if err != nil || !got.Capacity || math.Abs(got.Fraction-held.Fraction) > c.Hysteresis {
		t.Fatalf("%+v → %+v %v", held, got, err)
	}
}

// TestReviseBackToLocal: offloading was decided on an estimate of the
// mesh; measured behind a slow link it adds a few percent, below the
// threshold less the hysteresis, so a revision goes back to local. Rates
// that still gain more than that keep the offload (no flapping at the
// threshold).
func TestReviseBackToLocal(t *testing.T) {
	c := DefaultConfig()
	est, err := Decide(Profile{Ingest: 4000, Local: 936, Candidates: []Candidate{{Cut: 2, Remote: 936, OverheadRatio: 0.05}}}, c)
	if err != nil || !est.Offload {
		t.Fatalf("on the estimate: %+v %v", est, err)
	}
	got, err := Revise(est, Profile{Ingest: 4000, Local: 936, Candidates: []Candidate{{Cut: 2, Remote: 61, OverheadRatio: 0.05}}}, c)
	if err != nil || got.Offload {
		t.Fatalf("measured 61/s through the link: %+v → %+v %v", est, got, err)
	}
	// A gain of 8 %: below the threshold to enter (10 %), above the one to
	// leave (5 %): whichever side is in force stays.
	p := Profile{Ingest: 4000, Local: 1000, Candidates: []Candidate{{Cut: 2, Remote: 130, OverheadRatio: 0.05}}}
	if d, _ := Decide(p, c); d.Offload {
		t.Fatalf("entered at 8 %%: %+v", d)
	}
	if got, _ := Revise(est, p, c); !got.Offload {
		t.Errorf("left at 8 %%: %+v", got)
	}
	local, _ := Decide(p, c)
	if got, _ := Revise(local, p, c); got.Offload {
		t.Errorf("entered at 8 %% from local: %+v", got)
	}
}

// TestBestCut: a pipeline of a 2 ms op, then a 4 ms decode that makes
// each element 32 KiB, then a batch (each at parallelism 1), on 2 nodes.
// Behind 2 MB/s, shipping after the decode is bound by the link (61
// elements/s) and shipping before it by the host's decode (250/s): the
// cut goes before the decode. Behind a fast link, the nodes decode (500/s,
// their two 4 ms decodes) and the cut goes after it.
func TestBestCut(t *testing.T) {
	ops := []OpRate{{Seconds: 0.002, Parallelism: 1, Bytes: 8}, {Seconds: 0.004, Parallelism: 1, Bytes: 32 << 10}, {Seconds: 0, Parallelism: 1, Bytes: 320 << 10}}
	got, ok := BestCut(ops, CutEnv{Ingest: 4000, Nodes: 2, LinkBytesPerSecond: 2e6, Allowed: []int{1, 2}})
	if !ok || got.Cut != 1 || math.Abs(got.Rate-250) > 1e-6 || math.Abs(got.Suffix-250) > 1e-6 {
		t.Fatalf("slow link: %+v %v", got, ok)
	}
	got, ok = BestCut(ops, CutEnv{Ingest: 4000, Nodes: 2, LinkBytesPerSecond: 1e9, Allowed: []int{1, 2}})
	if !ok || got.Cut != 2 || math.Abs(got.Rate-500) > 1e-6 || math.Abs(got.Remote-500) > 1e-6 {
		t.Fatalf("fast link: %+v %v", got, ok)
	}
	// The loop's rate bounds every cut; a cut not allowed is skipped.
	if got, ok := BestCut(ops, CutEnv{Ingest: 100, Nodes: 2, LinkBytesPerSecond: 2e6, Allowed: []int{1, 7}}); !ok || got.Cut != 1 || got.Rate != 100 {
		t.Fatalf("ingest-bound: %+v %v", got, ok)
	}
	for _, e := range []CutEnv{{Ingest: 1, Nodes: 0, LinkBytesPerSecond: 1, Allowed: []int{1}}, {Ingest: 1, Nodes: 1, Allowed: []int{1}}, {Ingest: 1, Nodes: 1, LinkBytesPerSecond: 1}} {
		if _, ok := BestCut(ops, e); ok {
			t.Errorf("%+v: a cut chosen without what it needs", e)
		}
	}
}

// TestWholeRate: TestBestCut's pipeline without a cut. Behind 2 MB/s the
// link binds its 32 KiB rows (61/s): the cut before the decode (250/s)
// beats it. Behind a fast link the nodes' decodes bind (500/s), as they
// bind the best cut: a cut gains nothing there. On co-located nodes (a
// link as fast as memory) a one-op pipeline's cut never beats the whole.
func TestWholeRate(t *testing.T) {
	ops := []OpRate{{Seconds: 0.002, Parallelism: 1, Bytes: 8}, {Seconds: 0.004, Parallelism: 1, Bytes: 32 << 10}, {Seconds: 0, Parallelism: 1, Bytes: 320 << 10}}
	slow := CutEnv{Ingest: 4000, Nodes: 2, LinkBytesPerSecond: 2e6, Allowed: []int{1, 2}}
	if got := WholeRate(ops, slow); math.Abs(got-2e6/(32<<10)) > 1e-6 {
		t.Fatalf("slow link: %v", got)
	}
	fast := slow
	fast.LinkBytesPerSecond = 1e9
	best, _ := BestCut(ops, fast)
	if got := WholeRate(ops, fast); math.Abs(got-500) > 1e-6 || best.Rate > got {
		t.Fatalf("fast link: whole %v, best cut %+v", got, best)
	}
	one := []OpRate{{Seconds: 300e-6, Parallelism: 1, Bytes: 8}, {Seconds: 1e-6, Parallelism: 1, Bytes: 256}}
	co := CutEnv{Ingest: 1e9, Nodes: 5, LinkBytesPerSecond: 3e7, Allowed: []int{1}}
	best, _ = BestCut(one, co)
	if whole := WholeRate(one, co); best.Rate > whole {
		t.Fatalf("co-located: the cut %+v beats the whole pipeline %v", best, whole)
	}
	if WholeRate(nil, co) != 0 || WholeRate(one, CutEnv{Ingest: 1}) != 0 {
		t.Error("a rate without ops or nodes")
	}
}
