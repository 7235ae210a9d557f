package fsm

import (
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// TestOffloadCommands: a consumer's local worker leases like a node; with
// the nodes' part off, a node gets empty leases and no assignment; when
// the consumer detaches, its local worker is expired and the splits it
// held are leased again at once (no fence awaited), without what its
// receipts cover; bad requests are refused.
func TestOffloadCommands(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAttachConsumer("j1", "c2"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "nobody", LocalWorker: true}), ErrNotAssigned)
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Remote: "maybe"}), ErrInvalidCommand)
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", LocalWorker: true, Remote: RemoteOff,
		Report: &OffloadReport{Mode: "local", Fraction: 1, Reason: "test"}}))
	local := jobspec.LocalWorkerName("c1")
	if l := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 4)).(splits.Lease); len(l.Splits) != 0 || l.Done {
		t.Fatalf("a node leased %+v with the nodes' part off", l)
	}
	if !s.Jobs["j1"].RemoteOff() {
		t.Fatal("the nodes' part is on after a consumer turned it off")
	}
	l := applyOK(t, s, NewLeaseSplits("j1", local, 1, 2)).(splits.Lease)
	if len(l.Splits) != 2 {
		t.Fatalf("local lease %+v", l)
	}
	applyOK(t, s, NewReceipts("j1", "c1", 0, []Receipt{{Epoch: 0, Split: l.Splits[0], Got: ranges.Span(0, 1)}}, nil))
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c2", Remote: RemoteOn}))
	applyOK(t, s, NewDetachConsumer("j1", "c1"))
	if st := s.Jobs["j1"].Workers[local]; !st.Expired {
		t.Fatalf("the departed consumer's local worker: %+v", st)
	}
	if _, ok := s.Jobs["j1"].Offload.Reports["c1"]; ok {
		t.Fatal("the departed consumer's report stayed")
	}
	l2 := applyOK(t, s, NewLeaseSplits("j1", "w1", 2, 2)).(splits.Lease)
	if len(l2.Splits) != 2 || l2.Splits[0] != l.Splits[0] || len(l2.Exclude) == 0 || l2.Exclude[0].String() != "[0,1)" {
		t.Fatalf("the node's lease after the local worker's expiry: %+v (local had %v)", l2, l.Splits)
	}
	applyErr(t, s, NewLeaseSplits("j1", local, 3, 1), ErrNotAssigned)
}

// TestOffloadRetire: a consumer retires its local worker while it reads
// on: the worker is expired, the splits it held wait for the consumer's
// fence (it may still hold batches of them it has not receipted), then
// go to a node without what the receipts cover; retiring again changes
// nothing; an at-most-once job, or assign and retire at once, is refused.
func TestOffloadRetire(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAttachConsumer("j1", "c2"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", LocalWorker: true}))
	local := jobspec.LocalWorkerName("c1")
	l := applyOK(t, s, NewLeaseSplits("j1", local, 1, 2)).(splits.Lease)
	if len(l.Splits) != 2 {
		t.Fatalf("local lease %+v", l)
	}
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", LocalWorker: true, Retire: true}), ErrInvalidCommand)
	applyOK(t, s, NewReceipts("j1", "c1", 0, []Receipt{{Epoch: 0, Split: l.Splits[0], Got: ranges.Span(0, 1)}}, nil))
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Retire: true, Remote: RemoteOn}))
	if st := s.Jobs["j1"].Workers[local]; !st.Expired {
		t.Fatalf("the retired local worker: %+v", st)
	}
	applyErr(t, s, NewLeaseSplits("j1", local, 2, 1), ErrNotAssigned)
	// Until c1 fences it, a node gets the splits the local worker did not
	// lease, never its own.
	for id := uint64(3); ; id++ {
		l2 := applyOK(t, s, NewLeaseSplits("j1", "w1", id, 1)).(splits.Lease)
		if len(l2.Splits) == 0 {
			break
		}
		for _, sp := range l2.Splits {
			if sp == l.Splits[0] || sp == l.Splits[1] {
				t.Fatalf("split %d of the retired worker leased before its consumer fenced it", sp)
			}
		}
		if id > 100 {
			t.Fatal("no end of leases")
		}
	}
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Retire: true})) // again: nothing changes
	applyOK(t, s, NewReceipts("j1", "c1", 0, nil, []string{local}))
	l3 := applyOK(t, s, NewLeaseSplits("j1", "w1", 200, 2)).(splits.Lease)
	if len(l3.Splits) != 2 || l3.Splits[0] != l.Splits[0] || len(l3.Exclude) == 0 || l3.Exclude[0].String() != "[0,1)" {
		t.Fatalf("the node's lease after the fence: %+v (the local worker had %v)", l3, l.Splits)
	}

	amo := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryAtMostOnce})
	applyOK(t, amo, NewAttachConsumer("j1", "c1"))
	applyOK(t, amo, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", LocalWorker: true}))
	applyErr(t, amo, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Retire: true}), ErrInvalidCommand)
}

// TestOffloadCutMidJob: the job's only consumer cuts a running
// exactly-once job once: the leases answered before carry no cut, those
// after carry it (a retry of a request answered before the cut included:
// its splits then run cut, and each element says how it was made); the
// same cut again is a retry; another cut, a second consumer, at-most-once,
// a version-1 command with a cut, and a cut out of bounds are refused.
func TestOffloadCutMidJob(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	if l := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 2)).(splits.Lease); len(l.Splits) != 2 || l.Cut != 0 {
		t.Fatalf("lease before the cut: %+v", l)
	}
	v1 := newCommand(TypeOffload, 1, OffloadBody{Job: "j1", Consumer: "c1", Cut: 2})
	applyErr(t, s, v1, ErrInvalidCommand)
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: jobspec.MaxOffloadBoundary + 1}), ErrInvalidCommand)
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: -1}), ErrInvalidCommand)
	// A command refused for another of its parts cuts nothing.
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: 2, LocalWorker: true, Retire: true}), ErrInvalidCommand)
	if got := s.Jobs["j1"].Options.OffloadBoundary(); got != 0 {
		t.Fatalf("a refused command cut the job after %d ops", got)
	}
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Remote: RemoteOn, Cut: 2}))
	if got := s.Jobs["j1"].Options.OffloadBoundary(); got != 2 {
		t.Fatalf("OffloadBoundary %d after the cut, want 2", got)
	}
	if l := applyOK(t, s, NewLeaseSplits("j1", "w1", 2, 2)).(splits.Lease); len(l.Splits) != 2 || l.Cut != 2 {
		t.Fatalf("lease after the cut: %+v, want 2 splits cut after 2", l)
	}
	if l := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 2)).(splits.Lease); l.Cut != 2 {
		t.Fatalf("a retry answered after the cut: %+v, want the cut in force", l)
	}
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: 2})) // a retry
	applyErr(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: 3}), ErrInvalidCommand)

	two := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, two, NewAttachConsumer("j1", "c1"))
	applyOK(t, two, NewAttachConsumer("j1", "c2"))
	applyErr(t, two, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: 2}), ErrInvalidCommand)

	amo := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, amo, NewAttachConsumer("j1", "c1"))
	applyErr(t, amo, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", Cut: 2}), ErrInvalidCommand)
	if got := amo.Jobs["j1"].Options.OffloadBoundary(); got != 0 {
		t.Fatalf("a refused cut set OffloadBoundary %d", got)
	}
}

// TestIdleLease: while a consumer keeps the nodes off the job, a node's
// lease is answered from the state (IdleLease) exactly as LeaseSplits
// answers it, and LeaseSplits changes nothing then; whenever the command
// could do more (the nodes' part on, a new incarnation, a worker not
// assigned, another job id, a local worker), IdleLease says so.
func TestIdleLease(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 7, 1, 1)) // incarnation 7
	if _, ok := s.IdleLease("j1", 0, "w1", 7); ok {
		t.Fatal("an idle lease with the nodes' part on")
	}
	applyOK(t, s, NewOffload(OffloadBody{Job: "j1", Consumer: "c1", LocalWorker: true, Remote: RemoteOff}))
	id := s.Jobs["j1"].ID
	l, ok := s.IdleLease("j1", id, "w1", 7)
	if !ok || len(l.Splits) != 0 || l.Done {
		t.Fatalf("idle lease %+v, %v; want an empty one, not done", l, ok)
	}
	// The state but for the index of the last command applied.
	snap := func() string {
		t.Helper()
		i := s.Index
		s.Index = 0
		defer func() { s.Index = i }()
		b, err := s.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := snap()
	got := applyOK(t, s, NewLeaseSplitsOfJob("j1", id, "w1", 7, 2, 4)).(splits.Lease)
	if got.Epoch != l.Epoch || len(got.Splits) != 0 || got.Done != l.Done || got.Cut != l.Cut {
		t.Fatalf("LeaseSplits gave %+v, IdleLease %+v", got, l)
	}
	if snap() != before {
		t.Fatal("LeaseSplits changed the state where IdleLease answers for it")
	}
	for _, c := range []struct {
		name, job, worker string
		id, inc           uint64
	}{
		{"a new incarnation", "j1", "w1", id, 8},
		{"a worker not assigned", "j1", "w2", id, 7},
		{"another job id", "j1", "w1", id + 1, 7},
		{"no such job", "j2", "w1", 0, 7},
		{"a local worker", "j1", jobspec.LocalWorkerName("c1"), id, 0},
	} {
		if _, ok := s.IdleLease(c.job, c.id, c.worker, c.inc); ok {
			t.Errorf("%s: IdleLease answered for LeaseSplits", c.name)
		}
	}
}
