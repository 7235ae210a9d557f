package splits

import (
	"slices"
	"testing"
)

func TestPolicyStringParse(t *testing.T) {
	for _, p := range []Policy{Off, Dynamic, Static} {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p || !p.Valid() {
			t.Fatalf("%v: parse %v, %v", p, got, err)
		}
	}
	for in, want := range map[string]Policy{"": Off, "DYNAMIC": Dynamic, " Static ": Static} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Fatalf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParsePolicy("round-robin"); err == nil {
		t.Fatal("unknown policy parsed")
	}
	if Policy(7).Valid() || Policy(7).String() != "Policy(7)" {
		t.Fatalf("Policy(7): %v %v", Policy(7).Valid(), Policy(7))
	}
}

func TestStaticAssignment(t *testing.T) {
	cases := []struct {
		n       int64
		workers []string
		worker  string
		want    []int64
	}{
		{10, []string{"a", "b", "c"}, "a", []int64{0, 3, 6, 9}},
		{10, []string{"c", "b", "a"}, "b", []int64{1, 4, 7}},
		{10, []string{"c", "a", "b", "a"}, "c", []int64{2, 5, 8}},
		{2, []string{"a", "b", "c"}, "c", nil},
		{5, []string{"a", "b"}, "z", nil},
		{0, []string{"a"}, "a", nil},
		{-3, []string{"a"}, "a", nil},
		{3, nil, "a", nil},
		{3, []string{"a"}, "a", []int64{0, 1, 2}},
	}
	for _, tc := range cases {
		ws := slices.Clone(tc.workers)
		got := StaticAssignment(tc.n, tc.workers, tc.worker)
		if !slices.Equal(got, tc.want) {
			t.Errorf("StaticAssignment(%d, %v, %q) = %v, want %v", tc.n, tc.workers, tc.worker, got, tc.want)
		}
		if !slices.Equal(ws, tc.workers) {
			t.Errorf("StaticAssignment modified its workers argument: %v", tc.workers)
		}
	}
}

// TestStaticPartition: over every worker, the assignments partition the
// splits, and agree with staticOwner.
func TestStaticPartition(t *testing.T) {
	workers := []string{"w3", "w1", "w2", "w0", "w4"}
	for _, n := range []int64{0, 1, 4, 5, 6, 97} {
		owner := map[int64]string{}
		for _, w := range workers {
			for _, s := range StaticAssignment(n, workers, w) {
				if prev, ok := owner[s]; ok {
					t.Fatalf("n=%d: split %d assigned to %s and %s", n, s, prev, w)
				}
				owner[s] = w
				if o := staticOwner(s, workers); o != w {
					t.Fatalf("staticOwner(%d) = %s, assignment says %s", s, o, w)
				}
			}
		}
		if int64(len(owner)) != n {
			t.Fatalf("n=%d: %d splits assigned", n, len(owner))
		}
	}
	if staticOwner(1, nil) != "" || staticOwner(-1, workers) != "" {
		t.Fatal("staticOwner without workers or with a negative split")
	}
}

// staticOwner is the STATIC rule stated per split, the model that
// StaticAssignment is checked against: the worker that reads split under STATIC sharding
// over workers (sorted and deduplicated as in StaticAssignment), or "" if
// the list is empty or the split is negative.
func staticOwner(split int64, workers []string) string {
	ws := slices.Clone(workers)
	slices.Sort(ws)
	ws = slices.Compact(ws)
	if len(ws) == 0 || split < 0 {
		return ""
	}
	return ws[split%int64(len(ws))]
}
