package fsm

import (
	"reflect"
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// TestExactlyOnceCommands drives an exactly-once DYNAMIC job through the
// FSM: a dead worker's splits wait for the consumers' fences, come back with
// the delivered elements excluded, and the job completes once receipts
// cover what was produced; the state survives a snapshot; bad commands
// change nothing.
func TestExactlyOnceCommands(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))
	n := testDataset.NumSplits
	l1 := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 1)).(splits.Lease)
	if len(l1.Splits) != 1 {
		t.Fatalf("lease: %+v", l1)
	}
	sp := l1.Splits[0]
	applyOK(t, s, NewReceipts("j1", "c1", 0, []Receipt{{Epoch: 0, Split: sp, Got: ranges.Span(0, 2)}}, nil))
	applyOK(t, s, NewExpireWorker("w1"))
	// Everything else goes to w2; the orphan waits for c1's fence.
	l2 := applyOK(t, s, NewLeaseSplits("j1", "w2", 1, int(n))).(splits.Lease)
	if int64(len(l2.Splits)) != n-1 || l2.Exclude != nil {
		t.Fatalf("lease before the fence: %+v", l2)
	}
	var done []ranges.SplitEmitted
	for _, id := range l2.Splits {
		done = append(done, ranges.SplitEmitted{Split: id, Emitted: ranges.Span(0, 3)})
	}
	applyOK(t, s, newProduceSplits("j1", "w2", 0, done))
	var rs []Receipt
	for _, id := range l2.Splits {
		rs = append(rs, Receipt{Epoch: 0, Split: id, Got: ranges.Span(0, 3)})
	}
	applyOK(t, s, NewReceipts("j1", "c1", 0, rs, []string{"w1"}))
	l3 := applyOK(t, s, NewLeaseSplits("j1", "w2", 2, 4)).(splits.Lease)
	if len(l3.Splits) != 1 || l3.Splits[0] != sp || len(l3.Exclude) != 1 || l3.Exclude[0].String() != "[0,2)" {
		t.Fatalf("re-lease: %+v", l3)
	}
	// Bad commands change nothing.
	before, err := s.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	applyErr(t, s, NewReceipts("j1", "c1", 0, []Receipt{{Epoch: 0, Split: n, Got: ranges.Span(0, 1)}}, nil), ErrInvalidCommand)
	applyErr(t, s, NewReceipts("j1", "c1", 0, []Receipt{{Epoch: 0, Split: sp, Got: ranges.Span(2, 3)}, {Epoch: 0, Split: sp, Got: ranges.Set{5, 4}}}, nil), ErrInvalidCommand)
	applyErr(t, s, newProduceSplits("j1", "w1", 0, []ranges.SplitEmitted{{Split: sp}}), splits.ErrNotLeased)
	applyErr(t, s, NewReceipts("nope", "c1", 0, nil, nil), ErrUnknownJob)
	after, _ := s.MarshalSnapshot()
	if !reflect.DeepEqual(before, after) {
		t.Fatal("a rejected command changed the state")
	}
	applyOK(t, s, newProduceSplits("j1", "w2", 0, []ranges.SplitEmitted{{Split: sp, Emitted: ranges.Span(2, 3)}}))
	if p := s.Jobs["j1"].Dynamic.Progress(); p.Complete {
		t.Fatal("complete before the last receipt")
	}
	applyOK(t, s, NewReceipts("j1", "c1", 0, []Receipt{{Epoch: 0, Split: sp, Got: ranges.Span(2, 3)}}, nil))
	p := s.Jobs["j1"].Dynamic.Progress()
	if !p.Complete || p.Exact.Duplicates != 0 || p.Exact.Requeued != 1 || p.Total.Finished != n {
		t.Fatalf("progress %+v %+v", p, p.Exact)
	}
	r := snapshotRoundTrip(t, s)
	if !reflect.DeepEqual(r.Jobs["j1"].Dynamic, s.Jobs["j1"].Dynamic) {
		t.Fatalf("after snapshot: %+v", r.Jobs["j1"].Dynamic)
	}
}

// TestExactlyOnceOptions: exactly-once is only for plain DYNAMIC jobs, and
// a job re-created with the other delivery is a mismatch.
func TestExactlyOnceOptions(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce})
	applyErr(t, s, LegacyCreateJob("j1", "fp1", JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryAtMostOnce}, nil), ErrMismatch)
	for _, o := range []JobOptions{
		{Sharding: splits.Off, Delivery: DeliveryExactlyOnce},
		{Sharding: splits.Dynamic, Share: true, Delivery: DeliveryExactlyOnce},
		{Sharding: splits.Dynamic, Delivery: "twice"},
	} {
		applyErr(t, s, LegacyCreateJob("j2", "fp1", o, nil), ErrInvalidCommand)
	}
	applyOK(t, s, LegacyCreateJob("j3", "fp1", JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryAtMostOnce}, nil))
	if s.Jobs["j3"].Dynamic.ExactlyOnce() || s.Jobs["j3"].Options.Delivery() != DeliveryAtMostOnce {
		t.Fatalf("at-most-once job stored as %+v", s.Jobs["j3"].Options)
	}
}

// TestReceiptsApplyOnce: a report sent again with its number (its answer
// was lost) is applied once; a new number is applied; departure forgets
// the consumer's numbers.
func TestReceiptsApplyOnce(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce})
	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 2))
	r := []Receipt{{Epoch: 0, Split: 0, Got: ranges.Span(0, 5)}}
	applyOK(t, s, NewReceipts("j1", "c1", 1, r, nil))
	applyOK(t, s, NewReceipts("j1", "c1", 1, r, nil))
	if x := s.Jobs["j1"].Dynamic.Progress().Exact; x.Delivered != 5 || x.Duplicates != 0 {
		t.Fatalf("a report sent twice counted %+v", x)
	}
	applyOK(t, s, NewReceipts("j1", "c1", 2, r, nil)) // a new report of the same elements: a real duplicate
	if x := s.Jobs["j1"].Dynamic.Progress().Exact; x.Duplicates != 5 {
		t.Fatalf("a second delivery not counted: %+v", x)
	}
	applyOK(t, s, NewReceipts("j1", "ghost", 7, []Receipt{{Epoch: 0, Split: 1, Got: ranges.Span(0, 1)}}, nil))
	if _, kept := s.Jobs["j1"].Dynamic.Exact.ReceiptSeq["ghost"]; kept {
		t.Fatal("a consumer that is not attached had its report number kept")
	}
	applyOK(t, s, NewDetachConsumer("j1", "c1"))
	if seq := s.Jobs["j1"].Dynamic.Exact.ReceiptSeq; seq != nil {
		t.Fatalf("departed consumer's numbers kept: %v", seq)
	}
}

// LeaseSplits v4 says the worker runs a census (a local worker that does
// may be leased one: splits.DynamicState.LeaseAs); saying so in an older
// version is refused.
func TestLeaseSplitsCensusVersion(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, NewAssignTask("j1", "w1"))
	cmd := NewLeaseSplitsCensus("j1", 0, "w1", 0, 1, 2, nil)
	if cmd.Version != 4 {
		t.Fatalf("version %d, want 4", cmd.Version)
	}
	old := NewLeaseSplitsCensus("j1", 0, "w1", 0, 1, 2, nil)
	old.Version = 3
	applyErr(t, s, old, ErrInvalidCommand)
	if l := applyOK(t, s, cmd).(splits.Lease); !slices.Equal(l.Splits, []int64{0, 1}) {
		t.Fatalf("lease: %v, want [0 1]", l.Splits)
	}
}

// LeaseSplits v3 hands out a worker's preferred splits first; a preference
// in an older version, malformed or too long, is refused.
func TestLeaseSplitsPreferring(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, NewAssignTask("j1", "w1"))
	cmd := NewLeaseSplitsPreferring("j1", 0, "w1", 0, 1, 3, ranges.Set{20, 22, 30, 31})
	if cmd.Version != 3 || NewLeaseSplitsPreferring("j1", 0, "w1", 0, 1, 3, nil).Version != 2 {
		t.Fatalf("versions: %d with a preference", cmd.Version)
	}
	if l := applyOK(t, s, cmd).(splits.Lease); !slices.Equal(l.Splits, []int64{20, 21, 30}) {
		t.Fatalf("preferred lease: %v, want [20 21 30]", l.Splits)
	}
	if l := applyOK(t, s, NewLeaseSplits("j1", "w1", 2, 2)).(splits.Lease); !slices.Equal(l.Splits, []int64{0, 1}) {
		t.Fatalf("the cursor's lease: %v, want [0 1]", l.Splits)
	}
	old := NewLeaseSplitsPreferring("j1", 0, "w1", 0, 3, 3, ranges.Set{5, 6})
	old.Version = 2
	applyErr(t, s, old, ErrInvalidCommand)
	applyErr(t, s, NewLeaseSplitsPreferring("j1", 0, "w1", 0, 3, 3, ranges.Set{6, 5}), ErrInvalidCommand)
	var long ranges.Set
	for i := range int64(MaxPreferIntervals + 1) {
		long = append(long, 2*i, 2*i+1)
	}
	applyErr(t, s, NewLeaseSplitsPreferring("j1", 0, "w1", 0, 3, 3, long), ErrInvalidCommand)
	if err := s.Jobs["j1"].Dynamic.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestCountLossCommands: an at-most-once job created with CountLoss keeps
// exactly-once's bookkeeping and counts a dead worker's loss in elements
// through the FSM; CountLoss needs CreateJob v5 and an at-most-once plain
// DYNAMIC job, and a consumer asking without it is a mismatch.
func TestCountLossCommands(t *testing.T) {
	o := JobOptions{Sharding: splits.Dynamic, Epochs: 1, CountLoss: true}
	if v := createJobVersion(o); v != 5 {
		t.Fatalf("CreateJob version %d for count_loss, want 5", v)
	}
	s := newJobState(t, &o)
	if d := s.Jobs["j1"].Dynamic; !d.Counted() || s.Jobs["j1"].Options.Delivery() != DeliveryAtMostOnce || !s.Jobs["j1"].CountLoss {
		t.Fatalf("counted job stored as %+v", s.Jobs["j1"].Options)
	}
	for _, bad := range []JobOptions{
		{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce, CountLoss: true},
		{Sharding: splits.Dynamic, Share: true, CountLoss: true},
		{Sharding: splits.Off, CountLoss: true},
		{Sharding: splits.Dynamic, Coordinated: true, NumConsumers: 1, CountLoss: true},
	} {
		applyErr(t, s, LegacyCreateJob("j2", "fp1", bad, nil), ErrInvalidCommand)
	}
	v4 := LegacyCreateJob("j2", "fp1", o, nil)
	v4.Version = 4
	applyErr(t, s, v4, ErrInvalidCommand)
	applyErr(t, s, LegacyCreateJob("j1", "fp1", JobOptions{Sharding: splits.Dynamic, Epochs: 1}, nil), ErrMismatch)

	applyOK(t, s, NewAttachConsumer("j1", "c1"))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))
	l := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 2)).(splits.Lease)
	if len(l.Splits) != 2 {
		t.Fatalf("lease: %+v", l)
	}
	// w1 emitted its first split (5 elements; c1 got 3) and 2 of the
	// second, then died.
	applyOK(t, s, newProduceSplits("j1", "w1", 0, []ranges.SplitEmitted{{Split: l.Splits[0], Emitted: ranges.Span(0, 5)}}))
	applyOK(t, s, NewReceipts("j1", "c1", 1, []Receipt{{Epoch: 0, Split: l.Splits[0], Got: ranges.Span(0, 3)}, {Epoch: 0, Split: l.Splits[1], Got: ranges.Span(0, 2)}}, nil))
	applyOK(t, s, NewExpireWorker("w1"))
	applyOK(t, s, NewReceipts("j1", "c1", 2, nil, []string{"w1"}))
	if x := s.Jobs["j1"].Dynamic.Progress().Exact; x.Lost != 2 || !x.AtMostOnce {
		t.Fatalf("after the fence: %+v", x)
	}
	c := applyOK(t, s, NewLeaseSplits("j1", "w2", 1, 1)).(splits.Lease)
	if !c.Census || len(c.Splits) != 1 || c.Splits[0] != l.Splits[1] || c.Exclude[0].String() != "[0,2)" {
		t.Fatalf("census lease: %+v", c)
	}
	applyOK(t, s, newProduceSplits("j1", "w2", 0, []ranges.SplitEmitted{{Split: l.Splits[1], Emitted: ranges.Span(2, 6)}}))
	if x := s.Jobs["j1"].Dynamic.Progress().Exact; x.Lost != 2+4 || x.Censused != 1 {
		t.Fatalf("after the census: %+v", x)
	}
	r := snapshotRoundTrip(t, s)
	if !reflect.DeepEqual(r.Jobs["j1"].Dynamic, s.Jobs["j1"].Dynamic) || !reflect.DeepEqual(r.Jobs["j1"].Options, s.Jobs["j1"].Options) {
		t.Fatalf("after snapshot: %+v", r.Jobs["j1"])
	}
}
