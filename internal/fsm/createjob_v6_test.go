package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// v6Job is o (legacy options, valid) as a node proposes it since v6.
func v6Job(t testing.TB, name string, o JobOptions, static []string) Command {
	t.Helper()
	return NewCreateJob(Create{Name: name, Fingerprint: "fp1", Options: mustStored(t, o), CountLoss: o.CountLoss, StaticWorkers: static})
}

// TestCreateJobV6: the options travel as jobspec encodes them, under
// their own key, and the job holds them as they came; the consumer's
// choices are not among them.
func TestCreateJobV6(t *testing.T) {
	n, err := jobspec.Options{Name: "j1", Sharding: jobspec.Dynamic, Compression: "zstd", Workers: "3", Offload: "local", ConsumerIndex: 0, LocalCPUs: 2}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	c := NewCreateJob(Create{Name: n.Name(), Fingerprint: "fp1", Options: n.Job()})
	if c.Version != 6 {
		t.Fatalf("version %d", c.Version)
	}
	var body map[int]cbor.RawMessage
	if err := cbor.Unmarshal(c.Body, &body); err != nil {
		t.Fatal(err)
	}
	if _, legacy := body[3]; legacy {
		t.Fatal("v6 carries the legacy options' key 3")
	}
	want, _ := n.Job().MarshalCBOR()
	if !bytes.Equal(body[7], want) {
		t.Fatalf("options %x, want jobspec's encoding %x", []byte(body[7]), want)
	}
	s := newJobState(t, nil)
	if id := applyOK(t, s, c); id != uint64(2) {
		t.Fatalf("id %v", id)
	}
	j := s.Jobs["j1"]
	if !reflect.DeepEqual(j.Options, n.Job()) || j.CountLoss || j.Dynamic == nil || !j.Dynamic.ExactlyOnce() || j.Options.MaxWorkers() != 3 {
		t.Fatalf("stored %+v, count_loss %v", j.Options.Options(), j.CountLoss)
	}
	if o := j.Options.Options(); o.Offload != "" || o.LocalCPUs != 0 || o.Name != "" {
		t.Fatalf("the stored options carry the consumer's: %+v", o)
	}
	// The same options again join; other ones are named.
	if id := applyOK(t, s, c); id != uint64(2) {
		t.Fatalf("join: id %v", id)
	}
	other, err := jobspec.Options{Name: "j1", Sharding: jobspec.Dynamic, Workers: jobspec.AutoWorkers}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	err = applyErr(t, s, NewCreateJob(Create{Name: "j1", Fingerprint: "fp1", Options: other.Job()}), ErrMismatch)
	if !strings.Contains(err.Error(), "max_workers=3, not 0; compression=zstd, not none; autoscale=false, not true") {
		t.Fatalf("mismatch: %v", err)
	}
	// A job resumed by v6.
	r := ResumeBody{From: 7, Part: "c1", Want: 1, Delivered: ranges.Delivered{DoneBefore: 0}}
	applyOK(t, s, NewResumeJob(Create{Name: "r", Fingerprint: "fp1", Options: n.Job(), StaticWorkers: []string{"ignored"}}, r))
	if d := s.Jobs["r"].Dynamic; d.Resume == nil || d.Resume.From != 7 || s.Jobs["r"].StaticWorkers != nil {
		t.Fatalf("resumed job %+v", s.Jobs["r"])
	}
}

// TestCreateJobV6Refusals: what a v6 body may not say, each refused
// with the state as it was.
func TestCreateJobV6Refusals(t *testing.T) {
	s := newJobState(t, nil)
	amo := mustStored(t, JobOptions{Sharding: splits.Dynamic})
	exact := mustStored(t, JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce})
	static := mustStored(t, JobOptions{Sharding: splits.Static})
	for _, tc := range []struct {
		name string
		c    Command
		err  error
		want string
	}{
		{"count_loss of exactly-once", NewCreateJob(Create{Name: "a", Fingerprint: "fp1", Options: exact, CountLoss: true}), ErrInvalidCommand, "count_loss needs delivery at-most-once"},
		{"scale start without autoscale", NewCreateJob(Create{Name: "a", Fingerprint: "fp1", Options: amo, Scale: &ScaleStart{Workers: 2, From: "x"}}), ErrInvalidCommand, "a scale start is for autoscaling jobs"},
		{"resume of at-most-once", NewResumeJob(Create{Name: "a", Fingerprint: "fp1", Options: amo}, ResumeBody{From: 1, Part: "c", Want: 1}), ErrInvalidCommand, "only exactly-once DYNAMIC jobs"},
		{"static without workers", NewCreateJob(Create{Name: "a", Fingerprint: "fp1", Options: static}), ErrInvalidCommand, "needs the list of workers"},
		{"no name", NewCreateJob(Create{Fingerprint: "fp1", Options: amo}), ErrInvalidCommand, "empty job name"},
		{"unknown dataset", NewCreateJob(Create{Name: "a", Fingerprint: "fp9", Options: amo}), ErrUnknownDataset, "register it first"},
		{"no options", Command{Version: 6, Type: TypeCreateJob, Body: mustBody(t, map[int]any{1: "a", 2: "fp1"})}, ErrInvalidCommand, "without the job's options (key 7)"},
		{"legacy key", Command{Version: 6, Type: TypeCreateJob, Body: mustBody(t, map[int]any{1: "a", 2: "fp1", 3: map[int]any{1: 1}})}, ErrBadCommand, "unknown field"},
		{"options out of the rules", Command{Version: 6, Type: TypeCreateJob, Body: mustBody(t, map[int]any{1: "a", 2: "fp1", 7: map[int]any{2: "dynamic", 13: "at-most-once", 42: 2}})}, ErrBadCommand, "offload_boundary 2: needs delivery exactly-once"},
		{"a consumer's option", Command{Version: 6, Type: TypeCreateJob, Body: mustBody(t, map[int]any{1: "a", 2: "fp1", 7: map[int]any{2: "dynamic", 40: "local"}})}, ErrBadCommand, "a consumer's, never the job's"},
		{"an unknown option", Command{Version: 6, Type: TypeCreateJob, Body: mustBody(t, map[int]any{1: "a", 2: "fp1", 7: map[int]any{2: "dynamic", 99: 1}})}, ErrBadCommand, "unknown field"},
	} {
		err := applyErr(t, s, tc.c, tc.err)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestOlderNodeRefusesCreateJobV6: a node that knows CreateJob up to v5
// (the release before v6) refuses a v6 entry as it refuses any version it
// does not know, with the state as it was; v1..v5 entries it applies.
func TestOlderNodeRefusesCreateJobV6(t *testing.T) {
	row := commandTable[TypeCreateJob]
	older := row
	older.maxVersion = 5
	commandTable[TypeCreateJob] = older
	defer func() { commandTable[TypeCreateJob] = row }()

	s := newJobState(t, nil)
	err := applyErr(t, s, v6Job(t, "j", JobOptions{Sharding: splits.Dynamic}, nil), ErrUnknownVersion)
	if !strings.HasSuffix(err.Error(), "version: CreateJob v6 (this node knows v1..v5)") {
		t.Fatalf("refusal: %q", err)
	}
	applyOK(t, s, LegacyCreateJob("j", "fp1", JobOptions{Sharding: splits.Dynamic, CountLoss: true}, nil))
}

// TestV6CreatesAsLegacy: for options of every kind, valid or not, a
// CreateJob v1..v5 and the v6 command it upgrades to (UpgradeCreateJob)
// have the same result and leave states that snapshot alike, on a fresh
// state and on one where the name and the dataset are taken: v6 changes
// how the options travel, not what a job is.
func TestV6CreatesAsLegacy(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 4))
	pick := func(vs ...any) any { return vs[r.IntN(len(vs))] }
	upgraded := 0
	for i := range 6000 {
		o := JobOptions{
			Sharding:     pick(splits.Off, splits.Dynamic, splits.Dynamic, splits.Static).(splits.Policy),
			Epochs:       pick(int64(0), int64(1), int64(3), int64(-1), int64(-4)).(int64),
			NumConsumers: pick(0, 0, 2, 300).(int),
			MaxWorkers:   pick(0, 0, 3).(int),
			ConsumerTTL:  pick(time.Duration(0), time.Second, -time.Second).(time.Duration),
			GCAfter:      pick(time.Duration(0), time.Minute).(time.Duration),
			Share:        r.IntN(5) == 0, Coordinated: r.IntN(5) == 0, PadFinalRound: r.IntN(8) == 0,
			Compression: pick("", "", "lz4", "LZ4", "none").(string),
			Delivery:    pick("", "", DeliveryExactlyOnce, DeliveryAtMostOnce, "twice").(string),
			Autoscale:   r.IntN(3) == 0,
			CountLoss:   r.IntN(5) == 0,
		}
		if r.IntN(4) == 0 {
			o.AutoscaleThreshold, o.AutoscaleRevisit, o.AutoscalePause = pick(0.0, 0.2, 1.5).(float64), pick(0, 4, 2000).(int), pick(0, -1, -2).(int)
		}
		if r.IntN(4) == 0 {
			o.OffloadBoundary = pick(1, 3, -1).(int)
		}
		var static []string
		if r.IntN(2) == 0 {
			static = []string{"w2", "w1"}
		}
		legacy := at(LegacyCreateJob("j", "fp1", o, static), 5000)
		if r.IntN(3) == 0 {
			legacy = at(LegacyResumeJob("j", "fp1", o, ResumeBody{From: 2, Part: "c1", Want: 1}), 5000)
		}
		up, ok := UpgradeCreateJob(legacy)
		if !ok {
			continue // invalid options: no v6 form
		}
		upgraded++
		if up.Version != 6 || up.At != legacy.At {
			t.Fatalf("upgraded to v%d at %d", up.Version, up.At)
		}
		for _, base := range []func() *State{
			func() *State { return newJobState(t, nil) },
			func() *State {
				return newJobState(t, &JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce})
			},
			func() *State { return busyState(t) },
		} {
			a, b := base(), base()
			va, ea := a.ApplyIndex(9000, legacy)
			vb, eb := b.ApplyIndex(9000, up)
			if fmt.Sprint(va, ea) != fmt.Sprint(vb, eb) {
				t.Fatalf("case %d %+v: legacy %v %v, v6 %v %v", i, o, va, ea, vb, eb)
			}
			sa, _ := a.MarshalSnapshot()
			sb, _ := b.MarshalSnapshot()
			if !bytes.Equal(sa, sb) {
				t.Fatalf("case %d %+v: the states differ", i, o)
			}
		}
	}
	if upgraded < 300 {
		t.Fatalf("only %d of the cases had valid options: the test proves little", upgraded)
	}
}

// TestLegacyOptionsConvert: every legacy option the state machine
// accepted converts to a job's, but two values no node proposed.
func TestLegacyOptionsConvert(t *testing.T) {
	for _, o := range []JobOptions{
		{Sharding: splits.Dynamic, Epochs: -1, Autoscale: true, MaxWorkers: 3},
		{Sharding: splits.Static, Share: true, MaxWorkers: 2},
		{Sharding: splits.Dynamic, Coordinated: true, NumConsumers: 2, PadFinalRound: true, Delivery: DeliveryExactlyOnce},
		{Sharding: splits.Dynamic, CountLoss: true},
		{Sharding: splits.Off, Compression: "brotli9"},
	} {
		n := o.Normalized()
		if err := n.validate(); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if _, err := n.stored(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, o := range []JobOptions{
		{Sharding: splits.Dynamic, Autoscale: true, AutoscaleRevisit: -3},
		{Sharding: splits.Dynamic, Autoscale: true, AutoscaleThreshold: math.NaN()},
	} {
		n := o.Normalized()
		if err := n.validate(); err != nil {
			t.Fatalf("%+v: legacy refuses it: %v", o, err)
		}
		if _, err := n.stored(); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "autoscale_") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestBoundsAgree: the state machine's bounds are jobspec's, where
// jobspec cannot import them.
func TestBoundsAgree(t *testing.T) {
	if maxJobWorkers != jobspec.MaxJobWorkers || autoscale.MaxWorkers != jobspec.MaxJobWorkers {
		t.Fatalf("max workers: fsm %d, autoscale %d, jobspec %d", maxJobWorkers, autoscale.MaxWorkers, jobspec.MaxJobWorkers)
	}
	// CreateJob's newest version follows jobspec's schema (v6 is schema 1
	// without an owner, v7 schema 1 with one, v8 would be schema 2).
	if v := commandTable[TypeCreateJob].maxVersion; v != createJobOwnerV7-1+jobspec.Schema {
		t.Fatalf("CreateJob up to v%d, jobspec schema %d", v, jobspec.Schema)
	}
}

// TestFormat2SnapshotRestores: a snapshot written before format 3 (its
// jobs' options in the legacy form) restores to the state a format 3
// snapshot of the same state restores to; format 2 jobs whose options
// break format 2's rules are refused.
func TestFormat2SnapshotRestores(t *testing.T) {
	s := busyState(t)
	applyOK(t, s, LegacyCreateJob("loss", "fp1", JobOptions{Sharding: splits.Dynamic, CountLoss: true}, nil))
	v2 := format2(t, s, nil)
	got, err := UnmarshalSnapshot(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) || !got.Jobs["loss"].CountLoss {
		t.Fatalf("format 2 restores to another state")
	}
	for name, edit := range map[string]func(*jobV2){
		"not normalized":        func(j *jobV2) { j.Options.Epochs = 0 },
		"invalid":               func(j *jobV2) { j.Options.Delivery = "twice" },
		"count_loss outside":    func(j *jobV2) { j.Job.CountLoss = true },
		"no longer convertible": func(j *jobV2) { j.Options.Autoscale, j.Options.AutoscaleRevisit = true, -2 },
	} {
		if _, err := UnmarshalSnapshot(format2(t, s, edit)); !errors.Is(err, ErrSnapshotFormat) || !strings.Contains(err.Error(), "format 2: job") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// format2 is s as format 2 wrote it, each job edited by edit.
func format2(t testing.TB, s *State, edit func(*jobV2)) []byte {
	t.Helper()
	jobs := map[string]*jobV2{}
	for name, j := range s.Jobs {
		o := j.Options
		w := &jobV2{Job: *j}
		w.Job.Options, w.Job.CountLoss = jobspec.Job{}, false
		w.Options = JobOptions{Sharding: map[jobspec.Sharding]splits.Policy{jobspec.Off: splits.Off, jobspec.Dynamic: splits.Dynamic, jobspec.Static: splits.Static}[o.Sharding()],
			Epochs: o.Epochs(), NumConsumers: o.NumConsumers(), Share: o.Share(), Coordinated: o.Coordinated(), MaxWorkers: o.MaxWorkers(),
			ConsumerTTL: o.ConsumerTTL(), GCAfter: o.GCAfter(), PadFinalRound: o.PadFinalRound(), Compression: o.Compression(), Autoscale: o.Autoscale(),
			AutoscaleThreshold: o.AutoscaleThreshold(), AutoscaleRevisit: o.AutoscaleRevisit(), AutoscalePause: o.AutoscalePause(),
			OffloadBoundary: o.OffloadBoundary(), CountLoss: j.CountLoss}
		if o.Delivery() == jobspec.ExactlyOnce {
			w.Options.Delivery = DeliveryExactlyOnce
		}
		if edit != nil {
			edit(w)
		}
		jobs[name] = w
	}
	b, err := encMode.Marshal(struct {
		Format   uint16             `cbor:"1,keyasint"`
		KV       map[string][]byte  `cbor:"2,keyasint"`
		Index    uint64             `cbor:"3,keyasint"`
		Datasets map[string]Dataset `cbor:"4,keyasint"`
		Jobs     map[string]*jobV2  `cbor:"5,keyasint"`
	}{2, s.KV, s.Index, s.Datasets, jobs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzCreateJobV6 applies arbitrary CreateJob v6 bodies: nothing panics,
// a refusal changes nothing, and a body that applies does what the same
// job re-proposed through NewCreateJob does.
func FuzzCreateJobV6(f *testing.F) {
	exact := mustStored(f, JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce, OffloadBoundary: 2})
	for _, c := range []Command{
		v6Job(f, "new", JobOptions{Sharding: splits.Static, Epochs: 2}, []string{"w1", "w9"}),
		v6Job(f, "dyn", JobOptions{Sharding: splits.Dynamic, Epochs: 3}, nil),
		v6Job(f, "loss", JobOptions{Sharding: splits.Dynamic, CountLoss: true}, nil),
		v6Job(f, "sh", JobOptions{Sharding: splits.Dynamic, Share: true}, nil),
		v6Job(f, "co", JobOptions{Sharding: splits.Dynamic, Coordinated: true, NumConsumers: 2}, nil),
		NewCreateJob(Create{Name: "auto", Fingerprint: "fp1", Options: mustStored(f, JobOptions{Sharding: splits.Dynamic, Autoscale: true, MaxWorkers: 4}), Scale: &ScaleStart{Workers: 3, From: "x"}}),
		NewResumeJob(Create{Name: "dyn", Fingerprint: "fp1", Options: exact}, ResumeBody{From: 2, Part: "c", Want: 2}),
	} {
		f.Add([]byte(c.Body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := Command{Version: 6, Type: TypeCreateJob, At: 77, Body: body}
		s := busyState(t)
		before := s.Clone()
		v, err := s.Apply(c)
		if err != nil {
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("state changed on error %v", err)
			}
			return
		}
		b, err := decodeCreateJob(c)
		if err != nil {
			t.Fatalf("applied, but does not decode: %v", err)
		}
		n := Create{Name: b.Name, Fingerprint: b.Fingerprint, Options: b.Options, CountLoss: b.CountLoss, StaticWorkers: b.StaticWorkers, Scale: b.Scale}
		again := NewCreateJob(n)
		if b.Resume != nil {
			again = NewResumeJob(n, *b.Resume)
		}
		again.At = c.At
		w, err := before.Apply(again)
		if err != nil || fmt.Sprint(v) != fmt.Sprint(w) || !reflect.DeepEqual(s, before) {
			t.Fatalf("re-proposed: %v, %v; first %v", w, err, v)
		}
		snap, err := s.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalSnapshot(snap); err != nil {
			t.Fatalf("does not restore: %v", err)
		}
	})
}
