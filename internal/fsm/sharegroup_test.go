package fsm

import (
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// Share groups: sharing DYNAMIC jobs of one dataset lease from one group,
// which outlives any single job and goes with the last of them.
func TestShareGroupLifecycle(t *testing.T) {
	s := newJobState(t, nil)
	share := JobOptions{Sharding: splits.Dynamic, Share: true, GCAfter: 1}
	applyOK(t, s, at(LegacyCreateJob("a", "fp1", share, nil), 1000))
	applyOK(t, s, at(LegacyCreateJob("b", "fp1", share, nil), 1000))
	applyOK(t, s, at(LegacyCreateJob("solo", "fp1", JobOptions{Sharding: splits.Dynamic}, nil), 1000))
	three := share
	three.Epochs = 3
	applyOK(t, s, at(LegacyCreateJob("c", "fp1", three, nil), 1000))
	g := s.Jobs["a"].ShareGroup
	if g == "" || s.Jobs["b"].ShareGroup != g {
		t.Fatalf("a and b in groups %q and %q, want one", g, s.Jobs["b"].ShareGroup)
	}
	if s.Jobs["solo"].ShareGroup != "" {
		t.Fatalf("a job without Share joined group %q", s.Jobs["solo"].ShareGroup)
	}
	if gc := s.Jobs["c"].ShareGroup; gc == "" || gc == g {
		t.Fatalf("3 epochs in group %q, 1 epoch in %q: want two groups", gc, g)
	}
	if !s.Jobs[g].Group || s.Jobs[g].Dynamic == nil {
		t.Fatalf("group %q is not a dynamic group: %+v", g, s.Jobs[g])
	}

	// Reserved names; a group takes no consumers.
	applyErr(t, s, LegacyCreateJob(shareGroupPrefix+"x", "fp1", share, nil), ErrInvalidCommand)
	applyErr(t, s, NewAttachConsumer(g, "c1"), ErrInvalidCommand)

	// Assigning a worker to a job assigns it to the group; leases there
	// are shared by the jobs, and expiring the worker loses them.
	applyErr(t, s, NewLeaseSplits(g, "w1", 1, 4), ErrNotAssigned)
	applyOK(t, s, at(NewAssignTask("a", "w1"), 2000))
	l := applyOK(t, s, NewLeaseSplits(g, "w1", 1, 4)).(splits.Lease)
	if !reflect.DeepEqual(l.Splits, []int64{0, 1, 2, 3}) {
		t.Fatalf("lease %v", l.Splits)
	}
	applyOK(t, s, at(NewAssignTask("b", "w2"), 2000))
	l = applyOK(t, s, NewLeaseSplits(g, "w2", 1, 4)).(splits.Lease)
	if !reflect.DeepEqual(l.Splits, []int64{4, 5, 6, 7}) {
		t.Fatalf("second worker's lease %v: the group must hand out each split once", l.Splits)
	}
	lost := applyOK(t, s, NewExpireWorker("w1")).(map[string][]int64)
	if !reflect.DeepEqual(lost[g], []int64{0, 1, 2, 3}) {
		t.Fatalf("lost %v", lost)
	}
	// w1 comes back: it is out of the group for good, as out of a. Given
	// b, which reads the group too, it stays expired there and leases
	// nothing that a's consumers, which dropped it, would never read.
	applyOK(t, s, at(NewAssignTask("b", "w1"), 3000))
	if !s.Jobs[g].Workers["w1"].Expired {
		t.Fatal("assigning the expired worker to another job of the group revived it in the group")
	}
	applyErr(t, s, NewLeaseSplits(g, "w1", 2, 4), ErrNotAssigned)
	applyErr(t, s, NewAssignTask("a", "w1"), ErrNotAssigned)
	// AssignTask v1, from an older log, revived it in the group.
	applyOK(t, s, at(assignV1("a", "w1"), 3000))
	if s.Jobs[g].Workers["w1"].Expired {
		t.Fatal("v1: reassigning the worker to a job did not revive it in the group")
	}

	// The group outlives a, goes with b, and cannot be collected alone.
	applyOK(t, s, at(NewGarbageCollectJob("a"), 5000))
	if _, ok := s.Jobs[g]; !ok {
		t.Fatal("group collected while b reads it")
	}
	applyErr(t, s, at(NewGarbageCollectJob(g), 5000), ErrJobInUse)
	applyOK(t, s, at(NewGarbageCollectJob("b"), 5000))
	if _, ok := s.Jobs[g]; ok {
		t.Fatal("group kept after its last job")
	}

	// Snapshots keep groups and references.
	got := snapshotRoundTrip(t, s)
	if got.Jobs["c"].ShareGroup != s.Jobs["c"].ShareGroup || !got.Jobs[s.Jobs["c"].ShareGroup].Group {
		t.Fatal("snapshot lost the share group")
	}
}

// A sweep started after the group handed out everything gets a new group,
// so it reads the dataset instead of nothing.
func TestShareGroupDoneStartsAfresh(t *testing.T) {
	s := newJobState(t, nil)
	share := JobOptions{Sharding: splits.Dynamic, Share: true}
	applyOK(t, s, at(LegacyCreateJob("a", "fp1", share, nil), 1000))
	g := s.Jobs["a"].ShareGroup
	applyOK(t, s, at(NewAssignTask("a", "w1"), 1000))
	l := applyOK(t, s, NewLeaseSplits(g, "w1", 1, maxLeaseSplits)).(splits.Lease)
	if len(l.Splits) != int(testDataset.NumSplits) {
		t.Fatalf("leased %d of %d", len(l.Splits), testDataset.NumSplits)
	}
	applyOK(t, s, NewLeaseSplits(g, "w1", 2, 1)) // learns Done
	applyOK(t, s, at(LegacyCreateJob("b", "fp1", share, nil), 2000))
	if gb := s.Jobs["b"].ShareGroup; gb == g || gb == "" {
		t.Fatalf("b joined %q after %q was done", gb, g)
	}
}
