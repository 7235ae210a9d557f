package ranges

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// rs is a shorthand for epoch → split → Set.
type rs = map[int64]map[int64]Set

// maxEpochs is the bound the tests validate DoneBefore against (the
// sharding policies' own is jobspec.MaxEpochs).
const maxEpochs = 1 << 20

func TestDeliveredValidate(t *testing.T) {
	const splits, epochs = 4, 3
	ok := []Delivered{
		{},
		{DoneBefore: 3},
		{DoneBefore: 2, Missing: rs{0: {3: {0, 1}}, 1: {0: {2, 4, 6, 7}}}, Returned: rs{2: {1: {0, 9}}}},
		{Returned: rs{0: {0: {0, 1}}, 2: {3: {5, 6}}}},
	}
	for _, p := range ok {
		if err := p.Validate(splits, epochs, maxEpochs, 100); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	cases := []struct {
		name string
		p    Delivered
		want string
	}{
		{"negative done before", Delivered{DoneBefore: -1}, "done before epoch -1"},
		{"done before past the epochs", Delivered{DoneBefore: 4}, "done before epoch 4, job has 3 epochs"},
		{"too many intervals", Delivered{Returned: rs{0: {0: {0, 1, 2, 3, 4, 5}}}}, "3 intervals, limit 2"},
		{"missing from done before on", Delivered{DoneBefore: 1, Missing: rs{1: {0: {0, 1}}}}, "missing in epoch 1"},
		{"missing in a negative epoch", Delivered{DoneBefore: 1, Missing: rs{-1: {0: {0, 1}}}}, "missing in epoch -1"},
		{"returned before done before", Delivered{DoneBefore: 2, Returned: rs{1: {0: {0, 1}}}}, "returned in epoch 1"},
		{"returned past the epochs", Delivered{Returned: rs{3: {0: {0, 1}}}}, "returned in epoch 3"},
		{"empty missing epoch", Delivered{DoneBefore: 1, Missing: rs{0: {}}}, "missing: empty epoch 0"},
		{"empty returned epoch", Delivered{Returned: rs{0: {}}}, "returned: empty epoch 0"},
		{"negative split", Delivered{Returned: rs{0: {-1: {0, 1}}}}, "split -1 of epoch 0, job has 4 splits"},
		{"split past the splits", Delivered{DoneBefore: 1, Missing: rs{0: {4: {0, 1}}}}, "split 4 of epoch 0, job has 4 splits"},
		{"empty ranges", Delivered{Returned: rs{0: {1: {}}}}, "split 1 of epoch 0: empty"},
		{"reversed ranges", Delivered{Returned: rs{0: {1: {3, 1}}}}, "empty or reversed"},
		{"odd ranges", Delivered{DoneBefore: 1, Missing: rs{0: {1: {3}}}}, "odd length"},
		{"overlapping ranges", Delivered{Returned: rs{1: {1: {0, 3, 2, 4}}}}, "overlaps"},
		{"negative index", Delivered{Returned: rs{1: {1: {-2, 3}}}}, "negative start"},
	}
	for _, tc := range cases {
		err := tc.p.Validate(splits, epochs, maxEpochs, 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// A job that runs forever: any epoch, but not so many skipped that
	// one Lease would take forever.
	forever := Delivered{DoneBefore: maxEpochs, Returned: rs{maxEpochs + 5: {0: {0, 1}}}}
	if err := forever.Validate(splits, 0, maxEpochs, 10); err != nil {
		t.Errorf("forever: %v", err)
	}
	if err := (Delivered{DoneBefore: maxEpochs + 1}).Validate(splits, 0, maxEpochs, 10); err == nil {
		t.Error("forever: done before past MaxEpochs accepted")
	}
}

// deliveredElem is what p says of element i of split s of epoch e.
func deliveredElem(p Delivered, e, s, i int64) bool {
	if e < p.DoneBefore {
		return !p.Missing[e][s].Contains(i)
	}
	return p.Returned[e][s].Contains(i)
}

func TestMergeTable(t *testing.T) {
	cases := []struct {
		name string
		a, b Delivered
		want Delivered
	}{
		{"claim on one side, the other returned some of what it misses",
			Delivered{DoneBefore: 2, Missing: rs{0: {1: {0, 5}}, 1: {2: {3, 4}}}, Returned: rs{2: {0: {0, 2}}}},
			Delivered{Returned: rs{0: {1: {1, 3}}, 1: {2: {3, 4}}, 2: {0: {2, 4}, 1: {0, 1}}}},
			Delivered{DoneBefore: 2, Missing: rs{0: {1: {0, 1, 3, 5}}}, Returned: rs{2: {0: {0, 4}, 1: {0, 1}}}}},
		{"claims on both sides: missing only where both miss",
			Delivered{DoneBefore: 1, Missing: rs{0: {0: {0, 4}, 1: {0, 1}}}, Returned: rs{1: {0: {0, 1}}}},
			Delivered{DoneBefore: 2, Missing: rs{0: {0: {2, 6}, 2: {0, 1}}, 1: {3: {0, 2}}}},
			Delivered{DoneBefore: 2, Missing: rs{0: {0: {2, 4}}, 1: {3: {0, 2}}}}},
		{"claims on both sides, the later claim's missing less what the other returned",
			Delivered{DoneBefore: 1, Returned: rs{1: {3: {0, 1}}}},
			Delivered{DoneBefore: 2, Missing: rs{1: {3: {0, 2}}}},
			Delivered{DoneBefore: 2, Missing: rs{1: {3: {1, 2}}}}},
		{"returned only: the union",
			Delivered{Returned: rs{0: {0: {0, 2}}, 1: {1: {4, 5}}}},
			Delivered{Returned: rs{0: {0: {2, 3}, 1: {0, 1}}, 2: {0: {7, 8}}}},
			Delivered{Returned: rs{0: {0: {0, 3}, 1: {0, 1}}, 1: {1: {4, 5}}, 2: {0: {7, 8}}}}},
		{"everything missing was returned by the other",
			Delivered{DoneBefore: 1, Missing: rs{0: {0: {0, 2}}}},
			Delivered{Returned: rs{0: {0: {0, 2}}}},
			Delivered{DoneBefore: 1}},
		{"empty parts", Delivered{}, Delivered{}, Delivered{}},
	}
	for _, tc := range cases {
		for _, order := range [][2]Delivered{{tc.a, tc.b}, {tc.b, tc.a}} {
			p := order[0].Clone()
			o := order[1].Clone()
			p.Merge(o)
			if !reflect.DeepEqual(p, tc.want) {
				t.Errorf("%s: got %+v, want %+v", tc.name, p, tc.want)
			}
			if !reflect.DeepEqual(o, order[1]) {
				t.Errorf("%s: Merge changed its argument", tc.name)
			}
		}
	}
}

// randomPart is a random valid part of a job of 3 splits, 3 epochs.
func randomPart(rng *rand.Rand, claim bool) Delivered {
	set := func() Set {
		var r Set
		for i := range int64(8) {
			if rng.IntN(3) == 0 {
				r.Add(i)
			}
		}
		if r.Empty() {
			r.Add(int64(rng.IntN(8)))
		}
		return r
	}
	var p Delivered
	if claim {
		p.DoneBefore = int64(rng.IntN(4))
	}
	for e := range int64(3) {
		for s := range int64(3) {
			if rng.IntN(2) == 0 {
				continue
			}
			if e < p.DoneBefore {
				if p.Missing == nil {
					p.Missing = rs{}
				}
				Put(p.Missing, e, s, set())
			} else {
				if p.Returned == nil {
					p.Returned = rs{}
				}
				Put(p.Returned, e, s, set())
			}
		}
	}
	return p
}

// TestMergeAnyOrder: parts merged in any order, or in any grouping, give
// the same result, and it says an element was delivered exactly when some
// part says so.
func TestMergeAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for run := range 300 {
		n := 2 + rng.IntN(3)
		parts := make([]Delivered, n)
		for i := range parts {
			// Mostly one claim at most, as checkpoints make them; sometimes more.
			parts[i] = randomPart(rng, (i == 0 && rng.IntN(2) == 0) || rng.IntN(6) == 0)
		}
		var first Delivered
		for k := range 6 {
			perm := rng.Perm(n)
			var m Delivered
			if k%2 == 0 { // left fold
				m = parts[perm[0]].Clone()
				for _, i := range perm[1:] {
					m.Merge(parts[i])
				}
			} else { // two halves, merged
				h := n / 2
				l := parts[perm[0]].Clone()
				for _, i := range perm[1:h] {
					l.Merge(parts[i])
				}
				r := parts[perm[h]].Clone()
				for _, i := range perm[h+1:] {
					r.Merge(parts[i])
				}
				r.Merge(l)
				m = r
			}
			if err := m.Validate(3, 3, maxEpochs, 1<<20); err != nil {
				t.Fatalf("run %d: merged %+v: %v", run, m, err)
			}
			if k == 0 {
				first = m
			} else if !reflect.DeepEqual(m, first) {
				t.Fatalf("run %d: order %v gave %+v, another %+v (parts %+v)", run, perm, m, first, parts)
			}
		}
		for e := range int64(4) { // epoch 3 is beyond every part: delivered by none
			for s := range int64(3) {
				for i := range int64(10) {
					want := false
					for _, p := range parts {
						want = want || deliveredElem(p, e, s, i)
					}
					if got := deliveredElem(first, e, s, i); got != want {
						t.Fatalf("run %d: element %d/%d/%d delivered %v in the merge, %v in the parts %+v: merged %+v", run, e, s, i, got, want, parts, first)
					}
				}
			}
		}
	}
}

// Return and Settle: the consumer-side arithmetic of a checkpoint part.
func TestDeliveredReturnSettle(t *testing.T) {
	var p Delivered
	if n := p.Return(0, 1, 0, 10); n != 1 {
		t.Fatalf("first return added %d intervals", n)
	}
	if n := p.Return(0, 1, 10, 20); n != 0 {
		t.Fatalf("an adjacent return added %d intervals", n)
	}
	p.Return(1, 0, 0, 5)
	p.Settle(1, map[int64]map[int64]Set{0: {2: {3, 7}}})
	if p.DoneBefore != 1 || p.Returned[0] != nil || !p.Returned[1][0].ContainsSpan(0, 5) || !p.Missing[0][2].ContainsSpan(3, 7) {
		t.Fatalf("after Settle(1): %+v", p)
	}
	if n := p.Return(0, 2, 3, 5); n != 0 || !p.Missing[0][2].ContainsSpan(5, 7) || p.Missing[0][2].Contains(4) {
		t.Fatalf("a return of a missing span: %+v", p.Missing)
	}
	p.Return(0, 2, 5, 7)
	if p.Missing != nil && len(p.Missing) != 0 {
		t.Fatalf("missing left after every missing index returned: %+v", p.Missing)
	}
	p.Settle(1, nil) // not past DoneBefore: no change
	if p.DoneBefore != 1 || p.Returned[1] == nil {
		t.Fatalf("Settle to the same epoch changed the part: %+v", p)
	}
	if err := p.Validate(4, 3, maxEpochs, 100); err != nil {
		t.Fatal(err)
	}
}
