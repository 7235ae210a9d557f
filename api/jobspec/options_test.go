package jobspec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// norm normalizes o, failing the test on an error.
func norm(t testing.TB, o Options) Normalized {
	t.Helper()
	n, err := o.Normalize()
	if err != nil {
		t.Fatalf("%+v: %v", o, err)
	}
	return n
}

// TestNormalizeDefaults: the defaults Normalize fills, in the request form
// a client sends (the job's options, and the consumer's).
func TestNormalizeDefaults(t *testing.T) {
	d := func(o Options) Options { // the defaults every job gets
		o.Name = "j"
		if o.Offload == "" {
			o.Offload = OffloadAuto
		}
		if o.Epochs == 0 {
			o.Epochs = 1
		}
		if o.ConsumerTTL == 0 {
			o.ConsumerTTL = DefaultConsumerTTL
		}
		if o.GCAfter == 0 {
			o.GCAfter = DefaultGCAfter
		}
		return o
	}
	for _, tc := range []struct {
		in   Options
		want Options
	}{
		{Options{Name: "j"}, d(Options{Sharding: Off, Workers: AllWorkers})},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2}, d(Options{Sharding: Dynamic, Coordinated: true, NumConsumers: 2, Delivery: ExactlyOnce, Workers: AllWorkers})},
		// Every node serves a DYNAMIC job too by default (issue 42);
		// auto is asked for.
		{Options{Name: "j", Sharding: Dynamic}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AllWorkers})},
		{Options{Name: "j", Sharding: Dynamic, Workers: AutoWorkers}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AutoWorkers, Autoscale: true})},
		{Options{Name: "j", Sharding: Dynamic, Share: true}, d(Options{Sharding: Dynamic, Share: true, Delivery: AtMostOnce, Workers: AllWorkers})},
		{Options{Name: "j", Sharding: Static, Epochs: 3, ConsumerTTL: time.Second, GCAfter: 2 * time.Second}, d(Options{Sharding: Static, Epochs: 3, ConsumerTTL: time.Second, GCAfter: 2 * time.Second, Workers: AllWorkers})},
		// The fields from before Workers keep their meaning: MaxWorkers
		// alone is a fixed count, Autoscale alone is auto.
		{Options{Name: "j", Sharding: Dynamic, MaxWorkers: 3}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: "3", MaxWorkers: 3})},
		{Options{Name: "j", Sharding: Dynamic, Autoscale: true, MaxWorkers: 3}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AutoWorkers, Autoscale: true, MaxWorkers: 3})},
		{Options{Name: "j", Sharding: Dynamic, Workers: " ALL "}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AllWorkers})},
		{Options{Name: "j", Sharding: Dynamic, Workers: FixedWorkers(2)}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: "2", MaxWorkers: 2})},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2, Workers: "2"}, d(Options{Sharding: Dynamic, Coordinated: true, NumConsumers: 2, Delivery: ExactlyOnce, Workers: "2", MaxWorkers: 2})},
		// Names in their canonical form; none is "".
		{Options{Name: "j", Sharding: " Dynamic", Delivery: "AT-MOST-ONCE", Compression: "None", Workers: "4"}, d(Options{Sharding: Dynamic, Delivery: AtMostOnce, Workers: "4", MaxWorkers: 4})},
		{Options{Name: "j", Compression: "LZ4"}, d(Options{Sharding: Off, Compression: "lz4", Workers: AllWorkers})},
		// The consumer's choices, in their normalized form.
		{Options{Name: "j", Sharding: Dynamic, Offload: "0.25", LocalCPUs: 2}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AllWorkers, LocalCPUs: 2, Offload: "fraction=0.25"})},
		{Options{Name: "j", Sharding: Dynamic, Offload: "fraction=0"}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AllWorkers, Offload: OffloadRemote})},
		// Autoscaling's knobs alone ask for auto.
		{Options{Name: "j", Sharding: Dynamic, AutoscaleRevisit: 3}, d(Options{Sharding: Dynamic, Delivery: ExactlyOnce, Workers: AutoWorkers, Autoscale: true, AutoscaleRevisit: 3})},
	} {
		if got := norm(t, tc.in).Options(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v normalized:\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

// Every rule of Normalize, each error naming what was wrong.
func TestNormalizeRules(t *testing.T) {
	ok := []Options{
		{Name: "j"},
		{Name: "j", Sharding: Dynamic, Share: true, Compression: "lz4"},
		{Name: "j", Coordinated: true, NumConsumers: 4, ConsumerIndex: 3, PadFinalRound: true},
		{Name: "j", Compression: "none"},
		{Name: "j", Sharding: Dynamic, Workers: AutoWorkers, MaxWorkers: 4},
		{Name: "j", Sharding: Dynamic, Share: true, Workers: "2"},
		{Name: "j", Sharding: Static, Workers: AllWorkers},
		{Name: "j", Sharding: Dynamic, OffloadBoundary: 2, Offload: OffloadRemote},
		{Name: "j", Sharding: Dynamic, Offload: OffloadLocal, Resume: []byte{1}},
		{Name: "j", Compression: "brotli"}, // which names exist is transport/batch's, checked by the client and the node
	}
	for _, o := range ok {
		if _, err := o.Normalize(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "Name is required"},
		{Options{Name: "j", Sharding: "round-robin"}, `sharding: "round-robin"`},
		{Options{Name: "j", Epochs: -2}, "epochs: must be >= 1, got -2"},
		{Options{Name: "j", Epochs: -1}, "epochs: must be >= 1, got -1"}, // for ever: older logs' jobs only
		{Options{Name: "j", Epochs: MaxEpochs + 1}, "epochs: 1048577: want 1..1048576"},
		{Options{Name: "j", NumConsumers: -1}, "num_consumers -1"},
		{Options{Name: "j", NumConsumers: MaxJobConsumers + 1}, "num_consumers 4097"},
		{Options{Name: "j", MaxWorkers: MaxJobWorkers + 1}, "max_workers 4097"},
		{Options{Name: "j", GCAfter: -time.Second}, "gc_after -1s"},
		{Options{Name: "j", ConsumerTTL: 25 * time.Hour}, "consumer_ttl 25h0m0s"},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2, Sharding: Off}, "needs sharding dynamic"},
		{Options{Name: "j", Coordinated: true}, "NumConsumers: coordinated reads need"},
		{Options{Name: "j", Coordinated: true, NumConsumers: 257}, "1..256"},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2, ConsumerIndex: 2}, "ConsumerIndex 2"},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2, Share: true}, "coordinated on with share on: coordinated reads cannot be combined with share"},
		{Options{Name: "j", PadFinalRound: true}, "only for coordinated"},
		{Options{Name: "j", Compression: "Brötli"}, `compression "brötli"`},
		{Options{Name: "j", Sharding: Static, Share: true}, "share on with sharding static: ephemeral sharing works with sharding off or dynamic, not static"},
		{Options{Name: "j", Sharding: Static, Delivery: ExactlyOnce}, "delivery exactly-once with sharding static: delivery is only for sharding dynamic"},
		{Options{Name: "j", Sharding: Dynamic, Delivery: "twice"}, `delivery: "twice"`},
		{Options{Name: "j", Sharding: Dynamic, Share: true, Delivery: ExactlyOnce}, "delivery exactly-once with share on: exactly-once is not yet with share"},
		{Options{Name: "j", Workers: "many"}, `workers "many": want auto (the cluster chooses), all (every node) or a count >= 1`},
		{Options{Name: "j", Workers: "0"}, `workers "0"`},
		{Options{Name: "j", Workers: "-2"}, `workers "-2"`},
		{Options{Name: "j", Workers: AutoWorkers}, "workers auto with sharding off (the default): only DYNAMIC jobs autoscale"},
		{Options{Name: "j", Sharding: Static, Workers: AutoWorkers}, "workers auto with sharding static: only DYNAMIC jobs autoscale"},
		{Options{Name: "j", Sharding: Dynamic, Share: true, Workers: AutoWorkers}, "workers auto with share on: a sharing job does not autoscale (each worker produces for every sharing job): take workers all or a fixed count"},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2, Workers: AutoWorkers}, "workers auto with coordinated on: coordinated reads do not autoscale"},
		{Options{Name: "j", Coordinated: true, NumConsumers: 2, Autoscale: true}, "workers auto with coordinated on"},
		{Options{Name: "j", Sharding: Dynamic, Workers: AllWorkers, MaxWorkers: 2}, "workers all: contradicts max_workers 2"},
		{Options{Name: "j", Sharding: Dynamic, Workers: "3", MaxWorkers: 2}, "workers 3: contradicts max_workers 2"},
		{Options{Name: "j", Sharding: Dynamic, Workers: "3", Autoscale: true}, "workers 3: contradicts autoscale"},
		{Options{Name: "j", Sharding: Dynamic, Workers: AllWorkers, Autoscale: true}, "workers all: contradicts autoscale"},
		{Options{Name: "j", Offload: "sometimes"}, `offload "sometimes"`},
		{Options{Name: "j", Offload: OffloadLocal}, "offload local with sharding off (the default): a local worker needs sharding dynamic"},
		{Options{Name: "j", Sharding: Dynamic, Share: true, Offload: "0.5"}, "offload fraction=0.5 with share on: a local worker needs"},
		{Options{Name: "j", Sharding: Dynamic, LocalCPUs: -1}, "local_cpus -1"},
		{Options{Name: "j", Sharding: Dynamic, OffloadBoundary: -1}, "offload_boundary -1"},
		{Options{Name: "j", Sharding: Dynamic, OffloadBoundary: MaxOffloadBoundary + 1}, "offload_boundary 1025"},
		{Options{Name: "j", Sharding: Off, OffloadBoundary: 2}, "offload_boundary: only for sharding dynamic"},
		{Options{Name: "j", Sharding: Dynamic, Delivery: AtMostOnce, OffloadBoundary: 2}, "offload_boundary 2: needs delivery exactly-once"},
		{Options{Name: "j", Sharding: Dynamic, OffloadBoundary: 2, Offload: OffloadLocal}, "offload_boundary 2 with offload local"},
		{Options{Name: "j", Sharding: Dynamic, Delivery: AtMostOnce, Resume: []byte{1}}, "resume on with delivery at-most-once: only exactly-once DYNAMIC jobs"},
	} {
		_, err := tc.o.Normalize()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want one containing %q", tc.o, err, tc.want)
		}
	}
}

// TestAutoscaleTuning: the autoscaling knobs are checked, naming the
// option: out of range, or on a job that does not autoscale; in range on
// an autoscaling job they pass.
func TestAutoscaleTuning(t *testing.T) {
	dyn := Options{Name: "j", Sharding: Dynamic}
	for _, tc := range []struct {
		mod  func(*Options)
		want string // "" passes
	}{
		{func(o *Options) { o.AutoscaleThreshold, o.AutoscaleRevisit, o.AutoscalePause = 0.1, 20, -1 }, ""},
		{func(o *Options) { o.AutoscaleThreshold = 1 }, "autoscale_threshold"},
		{func(o *Options) { o.AutoscaleThreshold = -0.1 }, "autoscale_threshold"},
		{func(o *Options) { o.AutoscaleRevisit = -1 }, "autoscale_revisit"},
		{func(o *Options) { o.AutoscaleRevisit = MaxAutoscaleMetrics + 1 }, "autoscale_revisit"},
		{func(o *Options) { o.AutoscalePause = -2 }, "autoscale_pause"},
		{func(o *Options) { o.Workers, o.AutoscaleThreshold = AllWorkers, 0.1 }, "tune workers auto"},
		{func(o *Options) { o.Workers, o.AutoscalePause = FixedWorkers(2), 3 }, "tune workers auto"},
	} {
		o := dyn
		tc.mod(&o)
		_, err := o.Normalize()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error naming %s", o, err, tc.want)
		}
	}
}

// TestNormalizedSeparatesTheConsumer: the consumer's choices are in
// Consumer, never in the Job, and the request form carries both.
func TestNormalizedSeparatesTheConsumer(t *testing.T) {
	n := norm(t, Options{Name: "j", Coordinated: true, NumConsumers: 4, ConsumerIndex: 3, Offload: "remote", LocalCPUs: 1.5})
	c := n.Consumer()
	if n.Name() != "j" || c.Index() != 3 || c.Offload() != OffloadRemote || c.Fraction() != 0 || c.LocalCPUs() != 1.5 || c.Resume() != nil || !c.WorkersUnset() {
		t.Fatalf("name %q, consumer %+v", n.Name(), c)
	}
	jo := n.Job().Options()
	if jo.Name != "" || jo.ConsumerIndex != 0 || jo.Offload != "" || jo.LocalCPUs != 0 || jo.Resume != nil {
		t.Fatalf("the job's options carry the consumer's: %+v", jo)
	}
	// Two consumers of one job, with their own choices, ask for the same Job.
	m := norm(t, Options{Name: "j", Coordinated: true, NumConsumers: 4, ConsumerIndex: 1, Offload: "auto"})
	if d := n.Job().Diff(m.Job()); len(d) > 0 || !reflect.DeepEqual(n.Job(), m.Job()) {
		t.Fatalf("the consumers' jobs differ: %v", d)
	}
	if got := n.Options(); got.ConsumerIndex != 3 || got.Offload != OffloadRemote || got.LocalCPUs != 1.5 || got.Name != "j" {
		t.Fatalf("request form %+v", got)
	}
	// A job that is not coordinated has no consumer index (an older
	// client may send one: it is dropped, as the node always did).
	if i := norm(t, Options{Name: "j", Sharding: Dynamic, ConsumerIndex: 5}).Consumer().Index(); i != 0 {
		t.Fatalf("index %d of a job without coordinated reads", i)
	}
	// A fixed fraction keeps all its digits in the request form.
	f := norm(t, Options{Name: "j", Sharding: Dynamic, Offload: "0.12345"})
	if f.Consumer().Offload() != "fraction=0.123" || f.Consumer().Fraction() != 0.12345 || f.Options().Offload != "fraction=0.12345" {
		t.Fatalf("fraction: mode %q, fraction %v, request %q", f.Consumer().Offload(), f.Consumer().Fraction(), f.Options().Offload)
	}
}

// TestNormalizeIsOnce: normalizing the request form of a Normalized gives
// it back (a node that normalizes what a client normalized changes
// nothing), and a Job encodes, decodes and converts back to itself.
func TestNormalizeIsOnce(t *testing.T) {
	for _, o := range []Options{
		{Name: "a"},
		{Name: "b", Sharding: Dynamic, Epochs: 3, MaxWorkers: 5, Compression: "ZSTD", Offload: "0.3", LocalCPUs: 2, Resume: []byte{7}},
		{Name: "c", Coordinated: true, NumConsumers: 3, ConsumerIndex: 2, PadFinalRound: true, GCAfter: time.Hour},
		{Name: "d", Sharding: Dynamic, Workers: AutoWorkers, MaxWorkers: 6, AutoscaleThreshold: 0.1, AutoscaleRevisit: 5, AutoscalePause: -1},
		{Name: "e", Sharding: Dynamic, Share: true, NumConsumers: 9, ConsumerTTL: time.Minute},
		{Name: "f", Sharding: Dynamic, OffloadBoundary: 3},
	} {
		n := norm(t, o)
		again, want := norm(t, n.Options()), n
		want.consumer.workersUnset = false // the request form says the workers
		if !reflect.DeepEqual(again, want) {
			t.Errorf("%+v: normalized twice\n got %+v\nwant %+v", o, again, want)
		}
		checkJobRoundTrip(t, n.Job())
	}
}

// checkJobRoundTrip wants j to encode to CBOR and JSON and decode to
// itself, and StoredJob of its options to be it.
func checkJobRoundTrip(t *testing.T, j Job) {
	t.Helper()
	b, err := j.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	var k Job
	if err := k.UnmarshalCBOR(b); err != nil || !reflect.DeepEqual(k, j) {
		t.Fatalf("CBOR round trip of %+v: %+v, %v", j, k, err)
	}
	s, err := StoredJob(j.Options())
	if err != nil || !reflect.DeepEqual(s, j) {
		t.Fatalf("StoredJob of %+v: %+v, %v", j, s, err)
	}
	jb, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var l Job
	if err := json.Unmarshal(jb, &l); err != nil || !reflect.DeepEqual(l, j) {
		t.Fatalf("JSON round trip of %s: %+v, %v", jb, l, err)
	}
}

func TestParseWorkers(t *testing.T) {
	for in, want := range map[string]Workers{"": "", "auto": AutoWorkers, " All ": AllWorkers, "3": "3"} {
		if got, err := ParseWorkers(in); err != nil || got != want {
			t.Errorf("ParseWorkers(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "some", "2.5"} {
		if _, err := ParseWorkers(in); err == nil || !strings.Contains(err.Error(), "want auto") {
			t.Errorf("ParseWorkers(%q): %v", in, err)
		}
	}
	// JSON (the Python client's options) takes a count as a number too.
	var o Options
	for in, want := range map[string]Workers{`{"workers": 4}`: "4", `{"workers": "all"}`: AllWorkers} {
		if err := json.Unmarshal([]byte(in), &o); err != nil || o.Workers != want {
			t.Errorf("%s: %q, %v", in, o.Workers, err)
		}
	}
	if err := json.Unmarshal([]byte(`{"workers": 2.5}`), &o); err == nil || !strings.Contains(err.Error(), "workers 2.5") {
		t.Errorf("workers 2.5: %v", err)
	}
}

func TestParseSharding(t *testing.T) {
	for in, want := range map[string]Sharding{"": "", "off": Off, " Dynamic ": Dynamic, "STATIC": Static} {
		if got, err := ParseSharding(in); err != nil || got != want {
			t.Errorf("ParseSharding(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSharding("random"); err == nil || !strings.Contains(err.Error(), "off, dynamic or static") {
		t.Errorf("ParseSharding(random): %v", err)
	}
}

func TestParseOffload(t *testing.T) {
	for in, want := range map[string]struct {
		mode string
		f    float64
	}{"": {OffloadAuto, -1}, "Remote": {OffloadRemote, 0}, "local": {OffloadLocal, 1}, "0.3": {"fraction=0.3", 0.3}, "fraction=0.5": {"fraction=0.5", 0.5}, "1": {OffloadLocal, 1}} {
		if mode, f, err := ParseOffload(in); err != nil || mode != want.mode || f != want.f {
			t.Errorf("ParseOffload(%q) = %q, %v, %v; want %q, %v", in, mode, f, err, want.mode, want.f)
		}
	}
	for _, in := range []string{"1.5", "-0.1", "half", "NaN"} {
		if _, _, err := ParseOffload(in); err == nil || !strings.Contains(err.Error(), "want auto, remote, local") {
			t.Errorf("ParseOffload(%q): %v", in, err)
		}
	}
}

// TestWorkersUnset: a consumer that sets none of the worker options is
// told apart from one that asks for the default outright.
func TestWorkersUnset(t *testing.T) {
	for o, want := range map[*Options]bool{
		{Name: "j", Sharding: Dynamic}:                          true,
		{Name: "j", Sharding: Dynamic, Workers: " "}:            true,
		{Name: "j", Sharding: Dynamic, Workers: AutoWorkers}:    false,
		{Name: "j", Sharding: Dynamic, MaxWorkers: 2}:           false,
		{Name: "j", Sharding: Dynamic, Autoscale: true}:         false,
		{Name: "j", Sharding: Dynamic, AutoscalePause: -1}:      false,
		{Name: "j", Sharding: Dynamic, AutoscaleThreshold: 0.1}: false,
		{Name: "j", Sharding: Dynamic, AutoscaleRevisit: 3}:     false,
		{Name: "j", Sharding: Static, Workers: FixedWorkers(3)}: false,
	} {
		n := norm(t, *o)
		if got := n.Consumer().WorkersUnset(); got != want {
			t.Errorf("%+v: workers unset %v, want %v", *o, got, want)
		}
		if norm(t, n.Options()).Consumer().WorkersUnset() {
			t.Errorf("%+v: the request form leaves the workers unset", *o)
		}
	}
}

// TestWithResume: a checkpoint added to normalized options is checked as
// Normalize checks one, and changes nothing else.
func TestWithResume(t *testing.T) {
	n := norm(t, Options{Name: "j", Sharding: Dynamic, Offload: "0.5"})
	r, err := n.WithResume([]byte{1, 2})
	if err != nil || string(r.Consumer().Resume()) != "\x01\x02" || !r.Consumer().WorkersUnset() {
		t.Fatalf("%+v, %v", r.Consumer(), err)
	}
	want := norm(t, Options{Name: "j", Sharding: Dynamic, Offload: "0.5", Resume: []byte{1, 2}})
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("%+v, want %+v", r, want)
	}
	amo := norm(t, Options{Name: "j", Sharding: Dynamic, Delivery: AtMostOnce})
	if _, err := amo.WithResume([]byte{1}); err == nil || !strings.Contains(err.Error(), "resume: only exactly-once") {
		t.Fatalf("at-most-once resume: %v", err)
	}
}
