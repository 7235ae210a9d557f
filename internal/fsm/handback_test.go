package fsm

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// TestHandBackSplits: a draining worker's unstarted splits go to the next
// worker that asks, before any new split, and nothing is counted lost; a
// hand-back is refused when no other worker would take the splits.
func TestHandBackSplits(t *testing.T) {
	for _, exact := range []bool{false, true} {
		delivery := ""
		if exact {
			delivery = DeliveryExactlyOnce
		}
		t.Run("exact="+fmt.Sprint(exact), func(t *testing.T) {
			s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: delivery})
			applyOK(t, s, NewAssignTask("j1", "w1"))
			l1 := applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 100, 1, 4)).(splits.Lease) // 0..3

			// w1 alone in the job: nobody would read them.
			applyErr(t, s, NewHandBackSplits("j1", 0, "w1", 0, l1.Splits[2:]), splits.ErrHandBackRefused)

			applyOK(t, s, NewAssignTask("j1", "w2"))
			// Not w1's, or not leased: refused, nothing changes.
			applyErr(t, s, NewHandBackSplits("j1", 0, "w2", 0, l1.Splits[2:]), splits.ErrNotLeased)
			applyErr(t, s, NewHandBackSplits("j1", 0, "w1", 0, []int64{9}), splits.ErrNotLeased)
			applyErr(t, s, NewHandBackSplits("j1", 99, "w1", 0, l1.Splits[2:]), ErrNotAssigned) // another job ID

			applyOK(t, s, NewHandBackSplits("j1", 0, "w1", 0, l1.Splits[2:])) // 2, 3
			l2 := applyOK(t, s, NewLeaseSplitsAs("j1", "w2", 200, 1, 3)).(splits.Lease)
			if !reflect.DeepEqual(l2.Splits, []int64{2, 3}) {
				t.Fatalf("w2's lease after the hand-back: %v, want [2 3]", l2.Splits)
			}
			if exact && !reflect.DeepEqual(l2.Exclude, []ranges.Set{nil, nil}) {
				t.Fatalf("exclusions %v of splits nothing was delivered of", l2.Exclude)
			}
			v, _ := s.Job("j1")
			p := v.Progress
			if p.Total.Lost != 0 || p.Total.HandedBack != 2 || p.Outstanding != 4 || p.Waiting != 0 || p.Total.Leased != 4 {
				t.Fatalf("progress after hand-back and re-lease: %+v", p)
			}
			// The job state survives a snapshot with splits handed back.
			applyOK(t, s, NewHandBackSplits("j1", 0, "w2", 0, []int64{3}))
			b, err := s.MarshalSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalSnapshot(b)
			if err != nil || !reflect.DeepEqual(got, s) {
				t.Fatalf("snapshot with a split handed back: %v", err)
			}
		})
	}
}
