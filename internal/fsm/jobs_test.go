package fsm

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// at returns c stamped with the proposer time at.
func at(c Command, t int64) Command {
	c.At = t
	return c
}

// assignV1 is AssignTask as version 1 wrote it, in logs older than the
// rule that an expired worker is out of its jobs for good.
func assignV1(job, worker string) Command {
	c := NewAssignTask(job, worker)
	c.Version = 1
	return c
}

// applyOK applies c (through encode/decode, as the FSM does) and fails on error.
func applyOK(t *testing.T, s *State, c Command) any {
	t.Helper()
	return mustApply(t, s, c)
}

// applyErr applies c, wants an error matching want, and checks the state is unchanged.
func applyErr(t *testing.T, s *State, c Command, want error) error {
	t.Helper()
	before := s.Clone()
	_, err := s.ApplyEntry(mustEncode(t, c))
	if err == nil || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("%v: err = %v, want %v", c.Type, err, want)
	}
	if !reflect.DeepEqual(s, before) {
		t.Fatalf("%v: state changed on error %v", c.Type, err)
	}
	return err
}

// planNow is the tests' clock, the one the planner's tests use too;
// ago is planNow - d in Unix nanoseconds, the form commands carry.
var planNow = time.Unix(100_000, 0)

func ago(d time.Duration) int64 { return planNow.Add(-d).UnixNano() }

var testDataset = Dataset{Fingerprint: "fp1", Spec: []byte("spec-1"), NumSplits: 40}

// newJobState returns a state with testDataset and, if o is not nil, job "j1" over it.
func newJobState(t *testing.T, o *JobOptions, static ...string) *State {
	t.Helper()
	s := NewState()
	applyOK(t, s, NewRegisterDataset(testDataset))
	if o != nil {
		applyOK(t, s, at(LegacyCreateJob("j1", "fp1", *o, static), 1000))
	}
	return s
}

func TestRegisterDataset(t *testing.T) {
	s := NewState()
	if v := applyOK(t, s, NewRegisterDataset(testDataset)); v != true {
		t.Fatalf("first register: %v", v)
	}
	if v := applyOK(t, s, NewRegisterDataset(testDataset)); v != false {
		t.Fatalf("second register: %v", v)
	}
	other := testDataset
	other.Spec = []byte("spec-2")
	applyErr(t, s, NewRegisterDataset(other), ErrMismatch)
	other = testDataset
	other.NumSplits = 41
	applyErr(t, s, NewRegisterDataset(other), ErrMismatch)
	applyErr(t, s, NewRegisterDataset(Dataset{NumSplits: 1}), ErrInvalidCommand)
	applyErr(t, s, NewRegisterDataset(Dataset{Fingerprint: "x", NumSplits: -1}), ErrInvalidCommand)
	applyErr(t, s, NewRegisterDataset(Dataset{Fingerprint: strings.Repeat("x", maxNameBytes+1)}), ErrInvalidCommand)
	d, ok := s.Dataset("fp1")
	if !ok || !reflect.DeepEqual(d, testDataset) {
		t.Fatalf("dataset %+v, %v", d, ok)
	}
	d.Spec[0] = 'X'
	if s.Datasets["fp1"].Spec[0] != 's' {
		t.Fatal("Dataset returned an alias of the spec")
	}
	if _, ok := s.Dataset("nope"); ok {
		t.Fatal("unknown dataset found")
	}
}

func TestCreateJob(t *testing.T) {
	s := newJobState(t, nil)
	applyErr(t, s, LegacyCreateJob("j1", "nope", JobOptions{}, nil), ErrUnknownDataset)
	applyErr(t, s, LegacyCreateJob("", "fp1", JobOptions{}, nil), ErrInvalidCommand)
	applyErr(t, s, LegacyCreateJob("j1", "fp1", JobOptions{Sharding: 9}, nil), ErrInvalidCommand)
	applyErr(t, s, LegacyCreateJob("j1", "fp1", JobOptions{NumConsumers: -1}, nil), ErrInvalidCommand)
	applyErr(t, s, LegacyCreateJob("j1", "fp1", JobOptions{ConsumerTTL: -time.Second}, nil), ErrInvalidCommand)
	applyErr(t, s, LegacyCreateJob("j1", "fp1", JobOptions{Sharding: splits.Static}, nil), ErrInvalidCommand)

	idx := s.Index + 1
	id := applyOK(t, s, at(LegacyCreateJob("j1", "fp1", JobOptions{Sharding: splits.Dynamic, Epochs: 2}, nil), 500))
	if id != idx {
		t.Fatalf("job id %v, want the log index %d", id, idx)
	}
	// Idempotent by name; zero fields are defaults, so 0 and DefaultGCAfter agree.
	again := applyOK(t, s, at(LegacyCreateJob("j1", "fp1", JobOptions{Sharding: splits.Dynamic, Epochs: 2, GCAfter: DefaultGCAfter}, nil), 900))
	if again != id {
		t.Fatalf("second create: id %v, want %v", again, id)
	}
	cases := []struct {
		fp   string
		o    JobOptions
		want string
	}{
		{"fp1", JobOptions{Sharding: splits.Off, Epochs: 2}, `job "j1" exists with sharding=dynamic, not off`},
		{"fp1", JobOptions{Sharding: splits.Dynamic}, `epochs=2, not 1`},
		{"fp1", JobOptions{Sharding: splits.Dynamic, Epochs: 2, NumConsumers: 3, Share: true},
			`num_consumers=0, not 3; share=false, not true`},
		{"fp2", JobOptions{Sharding: splits.Dynamic, Epochs: 2}, `dataset fp1, not fp2`},
	}
	for _, tc := range cases {
		err := applyErr(t, s, LegacyCreateJob("j1", tc.fp, tc.o, nil), ErrMismatch)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mismatch message %q does not contain %q", err, tc.want)
		}
	}
	v, ok := s.Job("j1")
	if !ok || v.CreatedAt != 500 || v.NoConsumersSince != 500 || v.NumSplits != 40 || v.Options.Epochs() != 2 ||
		v.Options.ConsumerTTL() != defaultConsumerTTL || v.Dynamic == nil || v.Progress == nil || v.Progress.Remaining != 80 {
		t.Fatalf("job view %+v, progress %+v", v, v.Progress)
	}
	// Static: sorted, deduplicated, cut to MaxWorkers.
	applyOK(t, s, LegacyCreateJob("st", "fp1", JobOptions{Sharding: splits.Static, MaxWorkers: 2}, []string{"w3", "w1", "w2", "w1"}))
	if v, _ := s.Job("st"); !slices.Equal(v.StaticWorkers, []string{"w1", "w2"}) || v.Dynamic != nil || v.Progress != nil ||
		!slices.Equal(v.staticSplits("w2"), splits.StaticAssignment(40, []string{"w1", "w2"}, "w2")) {
		t.Fatalf("static job %+v", v)
	}
	// Forever.
	applyOK(t, s, LegacyCreateJob("forever", "fp1", JobOptions{Sharding: splits.Dynamic, Epochs: -5}, nil))
	if v, _ := s.Job("forever"); v.Options.Epochs() != -1 || v.Dynamic.Epochs != 0 || v.Progress.Remaining != -1 {
		t.Fatalf("forever job %+v", v)
	}
	if names := jobNames(s.JobList()); !slices.Equal(names, []string{"forever", "j1", "st"}) {
		t.Fatalf("jobs %v", names)
	}
}

func jobNames(vs []JobView) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func TestConsumerLeaseExpiryAndGC(t *testing.T) {
	s := newJobState(t, &JobOptions{NumConsumers: 2, ConsumerTTL: 10, GCAfter: 100})
	applyErr(t, s, at(NewAttachConsumer("nope", "c1"), 1), ErrUnknownJob)
	applyErr(t, s, at(NewAttachConsumer("j1", ""), 1), ErrInvalidCommand)
	if exp := applyOK(t, s, at(NewAttachConsumer("j1", "c1"), 2000)); exp != int64(2010) {
		t.Fatalf("expiry %v", exp)
	}
	if v, _ := s.Job("j1"); v.NoConsumersSince != 0 {
		t.Fatalf("NoConsumersSince %d with a consumer", v.NoConsumersSince)
	}
	applyOK(t, s, at(NewAttachConsumer("j1", "c2"), 2003))
	applyErr(t, s, at(NewAttachConsumer("j1", "c3"), 2004), ErrLimit)
	if exp := applyOK(t, s, at(NewAttachConsumer("j1", "c1"), 2005)); exp != int64(2015) { // renewal
		t.Fatalf("renewed expiry %v", exp)
	}
	// c2 expires at 2013, c1 at 2015: "before now" is strict.
	if got := applyOK(t, s, NewExpireConsumers(2013)); len(got.(map[string][]string)) != 0 {
		t.Fatalf("expired at its expiry: %v", got)
	}
	if got := applyOK(t, s, NewExpireConsumers(2014)); !reflect.DeepEqual(got, map[string][]string{"j1": {"c2"}}) {
		t.Fatalf("expire at 2014: %v", got)
	}
	applyErr(t, s, at(NewGarbageCollectJob("j1"), 1<<40), ErrJobInUse) // c1 still attached
	if got := applyOK(t, s, NewExpireConsumers(3000)); !reflect.DeepEqual(got, map[string][]string{"j1": {"c1"}}) {
		t.Fatalf("expire at 3000: %v", got)
	}
	v, _ := s.Job("j1")
	if v.NoConsumersSince != 2015 || len(v.ConsumerIDs()) != 0 {
		t.Fatalf("after expiry: %+v", v)
	}
	if v.gcDue(2114) || !v.gcDue(2115) {
		t.Fatal("GCDue around NoConsumersSince + GCAfter")
	}
	applyErr(t, s, at(NewGarbageCollectJob("j1"), 2114), ErrJobInUse)
	if got := applyOK(t, s, at(NewGarbageCollectJob("j1"), 2115)); got != true {
		t.Fatalf("gc: %v", got)
	}
	if _, ok := s.Job("j1"); ok {
		t.Fatal("job survived GC")
	}
	if got := applyOK(t, s, at(NewGarbageCollectJob("j1"), 2116)); got != false {
		t.Fatalf("second gc: %v", got)
	}
	applyErr(t, s, at(NewAttachConsumer("j1", "c1"), 2117), ErrUnknownJob)

	// Detach: the last one out starts the GC clock.
	applyOK(t, s, at(LegacyCreateJob("j2", "fp1", JobOptions{}, nil), 5000))
	applyOK(t, s, at(NewAttachConsumer("j2", "a"), 5001))
	applyOK(t, s, at(NewAttachConsumer("j2", "b"), 5002))
	if got := applyOK(t, s, at(NewDetachConsumer("j2", "a"), 5003)); got != true {
		t.Fatalf("detach: %v", got)
	}
	if got := applyOK(t, s, at(NewDetachConsumer("j2", "a"), 5004)); got != false {
		t.Fatalf("second detach: %v", got)
	}
	applyOK(t, s, at(NewDetachConsumer("j2", "b"), 5005))
	if v, _ := s.Job("j2"); v.NoConsumersSince != 5005 {
		t.Fatalf("NoConsumersSince after detach: %d", v.NoConsumersSince)
	}
	applyErr(t, s, NewDetachConsumer("nope", "a"), ErrUnknownJob)
}

func TestAssignTask(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, MaxWorkers: 2})
	applyErr(t, s, NewAssignTask("nope", "w1"), ErrUnknownJob)
	if got := applyOK(t, s, at(NewAssignTask("j1", "w1"), 10)); got != true {
		t.Fatalf("assign: %v", got)
	}
	if got := applyOK(t, s, at(NewAssignTask("j1", "w1"), 11)); got != false {
		t.Fatalf("assign again: %v", got)
	}
	applyOK(t, s, at(NewAssignTask("j1", "w2"), 12))
	applyErr(t, s, NewAssignTask("j1", "w3"), ErrLimit)
	if got := applyOK(t, s, NewExpireWorker("w1")); !reflect.DeepEqual(got, map[string][]int64{"j1": nil}) {
		t.Fatalf("expire w1: %#v", got)
	}
	if got := applyOK(t, s, NewExpireWorker("w1")); len(got.(map[string][]int64)) != 0 {
		t.Fatalf("second expire: %v", got)
	}
	applyOK(t, s, at(NewAssignTask("j1", "w3"), 13))
	applyErr(t, s, assignV1("j1", "w1"), ErrLimit) // v1: back, but the job is full again
	applyOK(t, s, NewExpireWorker("w2"))
	// An expired worker is out of the job for good, even with room for it:
	// its consumers have dropped it.
	err := applyErr(t, s, at(NewAssignTask("j1", "w1"), 14), ErrNotAssigned)
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	// Version 1, replayed from an older log, still assigns it again.
	if got := applyOK(t, s, at(assignV1("j1", "w1"), 14)); got != true {
		t.Fatalf("v1 re-assign after restart: %v", got)
	}
	v, _ := s.Job("j1")
	if !slices.Equal(v.liveWorkers(), []string{"w1", "w3"}) || v.Workers["w1"] != (WorkerState{Since: 14}) || !v.Workers["w2"].Expired {
		t.Fatalf("workers %+v", v.Workers)
	}
	// Static jobs take only the workers agreed at creation.
	applyOK(t, s, LegacyCreateJob("st", "fp1", JobOptions{Sharding: splits.Static}, []string{"a", "b"}))
	applyOK(t, s, NewAssignTask("st", "b"))
	applyErr(t, s, NewAssignTask("st", "c"), ErrNotAssigned)
}

func TestLeaseSplits(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 2})
	applyOK(t, s, LegacyCreateJob("off", "fp1", JobOptions{}, nil))
	applyOK(t, s, NewAssignTask("off", "w1"))
	applyErr(t, s, NewLeaseSplits("off", "w1", 1, 4), ErrNotDynamic)
	applyErr(t, s, NewLeaseSplits("j1", "w1", 1, 4), ErrNotAssigned)
	applyErr(t, s, NewLeaseSplits("nope", "w1", 1, 4), ErrUnknownJob)
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))

	l1 := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 4)).(splits.Lease)
	if !reflect.DeepEqual(l1, splits.Lease{Epoch: 0, Splits: []int64{0, 1, 2, 3}}) {
		t.Fatalf("lease %+v", l1)
	}
	// A retry after a lost response: same lease, nothing more handed out.
	before := s.Jobs["j1"].Clone()
	retry := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 4)).(splits.Lease)
	if !reflect.DeepEqual(retry, l1) || !reflect.DeepEqual(before, s.Jobs["j1"]) {
		t.Fatalf("retry %+v changed the job", retry)
	}
	l2 := applyOK(t, s, NewLeaseSplits("j1", "w2", 1, maxLeaseSplits*10)).(splits.Lease)
	if len(l2.Splits) != 36 || l2.Splits[0] != 4 {
		t.Fatalf("w2 lease %+v", l2)
	}
	// w2 finishes a part, then dies: the rest of its lease is lost.
	p := applyOK(t, s, NewFinishSplits("j1", "w2", 0, l2.Splits[:6])).(splits.Progress)
	if p.Total.Finished != 6 {
		t.Fatalf("progress after finish %+v", p)
	}
	applyErr(t, s, NewFinishSplits("j1", "w1", 0, l2.Splits[6:7]), splits.ErrNotLeased)
	applyErr(t, s, NewFinishSplits("j1", "w2", 0, l2.Splits[:1]), splits.ErrNotLeased) // already finished
	lost := applyOK(t, s, NewExpireWorker("w2")).(map[string][]int64)
	if !slices.Equal(lost["j1"], l2.Splits[6:]) {
		t.Fatalf("lost %v", lost)
	}
	applyErr(t, s, NewLeaseSplits("j1", "w2", 2, 4), ErrNotAssigned)
	applyErr(t, s, NewFinishSplits("j1", "w2", 0, l2.Splits[6:7]), splits.ErrNotLeased)
	// w2 comes back: it stays out of the job and leases nothing.
	applyErr(t, s, NewAssignTask("j1", "w2"), ErrNotAssigned)
	applyErr(t, s, NewLeaseSplits("j1", "w2", 2, 4), ErrNotAssigned)
	// The lost splits are never leased again in epoch 0, to anyone: not
	// to a new worker, nor to w2 put back by an older log's AssignTask v1.
	applyOK(t, s, NewAssignTask("j1", "w3"))
	applyOK(t, s, assignV1("j1", "w2"))
	seen := map[int64]bool{}
	for req := uint64(2); ; req++ {
		w := []string{"w2", "w3"}[req%2]
		l := applyOK(t, s, NewLeaseSplits("j1", w, req, 3)).(splits.Lease)
		if l.Epoch != 0 {
			break
		}
		for _, sp := range l.Splits {
			if slices.Contains(l2.Splits, sp) || slices.Contains(l1.Splits, sp) || seen[sp] {
				t.Fatalf("split %d leased again in epoch 0", sp)
			}
			seen[sp] = true
		}
		if l.Done {
			break
		}
	}
	v, _ := s.Job("j1")
	if v.Progress.Total.Lost != 30 || v.Progress.Epoch != 1 {
		t.Fatalf("progress %+v", v.Progress)
	}
}

// TestJobsSnapshotRoundTrip: jobs of every kind survive a snapshot exactly,
// a format 1 snapshot still restores, and broken job state is refused.
func TestJobsSnapshotRoundTrip(t *testing.T) {
	s := busyState(t)
	b1, err := s.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalSnapshot(b1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("restored state differs:\n%+v\n%+v", got.Jobs["dyn"], s.Jobs["dyn"])
	}
	b2, _ := got.MarshalSnapshot()
	if string(b1) != string(b2) {
		t.Fatal("snapshot bytes not deterministic")
	}
	// The restored state keeps working identically.
	for _, st := range []*State{s, got} {
		applyOK(t, st, NewLeaseSplits("dyn", "w1", 99, 5))
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatal("states diverge after restore")
	}

	v1, _ := encMode.Marshal(snapshotV1{Format: 1, KV: map[string][]byte{"a": {1}}})
	old, err := UnmarshalSnapshot(v1)
	if err != nil || string(old.KV["a"]) != "\x01" || len(old.Jobs) != 0 || old.Jobs == nil || old.Datasets == nil {
		t.Fatalf("format 1: %+v, %v", old, err)
	}

	breakers := map[string]func(s *State){
		"dynamic job without state": func(s *State) { s.Jobs["dyn"].Dynamic = nil },
		"off job with dynamic state": func(s *State) {
			s.Jobs["off"].Dynamic = splits.NewDynamic(40, 1)
		},
		"dynamic invariant": func(s *State) { s.Jobs["dyn"].Dynamic.Next = 1000 },
		"job key":           func(s *State) { s.Jobs["other"] = s.Jobs["off"] },
		"missing dataset":   func(s *State) { delete(s.Datasets, "fp1") },
		"unsorted static":   func(s *State) { s.Jobs["st"].StaticWorkers = []string{"b", "a"} },
		"count_loss of off": func(s *State) { s.Jobs["off"].CountLoss = true },
		"id after index":    func(s *State) { s.Jobs["off"].ID = s.Index + 1 },
		"nil job":           func(s *State) { s.Jobs["off"] = nil },
	}
	for name, mutate := range breakers {
		t.Run(name, func(t *testing.T) {
			bad := busyState(t)
			mutate(bad)
			data, err := bad.MarshalSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := UnmarshalSnapshot(data); !errors.Is(err, ErrSnapshotFormat) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// busyState has a job of each policy with consumers, workers and leases.
func busyState(tb testing.TB) *State {
	tb.Helper()
	s := NewState()
	s.KV["k"] = []byte("v")
	do := func(c Command) any {
		tb.Helper()
		v, err := s.ApplyEntry(mustEncode(tb, c))
		if err != nil {
			tb.Fatalf("%v: %v", c.Type, err)
		}
		return v
	}
	do(NewRegisterDataset(testDataset))
	do(at(LegacyCreateJob("dyn", "fp1", JobOptions{Sharding: splits.Dynamic, Epochs: 3}, nil), 10))
	do(at(LegacyCreateJob("off", "fp1", JobOptions{Share: true}, nil), 11))
	do(at(LegacyCreateJob("st", "fp1", JobOptions{Sharding: splits.Static}, []string{"w2", "w1"}), 12))
	for _, j := range []string{"dyn", "off", "st"} {
		do(at(NewAttachConsumer(j, "c-"+j), 20))
		do(at(NewAssignTask(j, "w1"), 21))
		do(at(NewAssignTask(j, "w2"), 22))
	}
	do(NewLeaseSplits("dyn", "w1", 1, 30))
	l := do(NewLeaseSplits("dyn", "w2", 1, 30)).(splits.Lease) // 30..39, then epoch 1
	do(NewFinishSplits("dyn", "w2", l.Epoch, l.Splits[:2]))
	do(NewLeaseSplits("dyn", "w2", 2, 7))
	do(NewExpireWorker("w2"))
	do(NewLeaseSplits("dyn", "w1", 2, 2))
	return s
}

// Compression is a well-formed name (any: a newer node's compression must
// apply here as there), stored as given, and part of the options a joining
// consumer must match.
func TestJobCompressionOption(t *testing.T) {
	s := newJobState(t, nil)
	applyOK(t, s, LegacyCreateJob("future", "fp1", JobOptions{Sharding: splits.Dynamic, Compression: "brotli9"}, nil))
	for _, bad := range []string{"none", "LZ4", "lz-4", "averyveryverylongname"} {
		err := applyErr(t, s, LegacyCreateJob("c", "fp1", JobOptions{Sharding: splits.Dynamic, Compression: bad}, nil), ErrInvalidCommand)
		if !strings.Contains(err.Error(), "compression") {
			t.Fatalf("compression %q: %v, want an error naming compression", bad, err)
		}
	}
	applyOK(t, s, LegacyCreateJob("c", "fp1", JobOptions{Sharding: splits.Dynamic, Compression: "zstd"}, nil))
	if v, ok := s.Job("c"); !ok || v.Options.Compression() != "zstd" {
		t.Fatalf("stored options %+v", v.Options)
	}
	err := applyErr(t, s, LegacyCreateJob("c", "fp1", JobOptions{Sharding: splits.Dynamic, Compression: "lz4"}, nil), ErrMismatch)
	if !strings.Contains(err.Error(), "compression=zstd, not lz4") {
		t.Fatalf("mismatch: %v", err)
	}
	applyOK(t, s, LegacyCreateJob("c", "fp1", JobOptions{Sharding: splits.Dynamic, Compression: "zstd"}, nil))
}

// mustStored is legacy options o, normalized, as a job holds them.
func mustStored(t testing.TB, o JobOptions) jobspec.Job {
	t.Helper()
	j, err := o.Normalized().stored()
	if err != nil {
		t.Fatal(err)
	}
	return j
}
