package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

func TestJobOptionsDefaults(t *testing.T) {
	for _, tc := range []struct {
		in   JobOptions
		want JobOptions
	}{
		{JobOptions{Name: "j"}, JobOptions{Name: "j", Sharding: Off, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Workers: AllWorkers}},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, Coordinated: true, NumConsumers: 2, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: AllWorkers}},
		// DYNAMIC jobs autoscale by default.
		{JobOptions{Name: "j", Sharding: Dynamic}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: AutoWorkers, Autoscale: true}},
		{JobOptions{Name: "j", Sharding: Dynamic, Share: true}, JobOptions{Name: "j", Sharding: Dynamic, Share: true, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: AtMostOnce, Workers: AllWorkers}},
		{JobOptions{Name: "j", Sharding: Static, Epochs: 3, ConsumerTTL: time.Second, GCAfter: 2 * time.Second}, JobOptions{Name: "j", Sharding: Static, Epochs: 3, ConsumerTTL: time.Second, GCAfter: 2 * time.Second, Workers: AllWorkers}},
		// The fields from before Workers keep their meaning: MaxWorkers
		// alone is a fixed count, Autoscale alone is auto.
		{JobOptions{Name: "j", Sharding: Dynamic, MaxWorkers: 3}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: "3", MaxWorkers: 3}},
		{JobOptions{Name: "j", Sharding: Dynamic, Autoscale: true, MaxWorkers: 3}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: AutoWorkers, Autoscale: true, MaxWorkers: 3}},
		{JobOptions{Name: "j", Sharding: Dynamic, Workers: " ALL "}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: AllWorkers}},
		{JobOptions{Name: "j", Sharding: Dynamic, Workers: FixedWorkers(2)}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: "2", MaxWorkers: 2}},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2, Workers: "2"}, JobOptions{Name: "j", Sharding: Dynamic, Epochs: 1, Coordinated: true, NumConsumers: 2, ConsumerTTL: DefaultConsumerTTL, GCAfter: DefaultGCAfter, Delivery: ExactlyOnce, Workers: "2", MaxWorkers: 2}},
	} {
		if got := tc.in.WithDefaults(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// Every rule of Validate, each error naming what was wrong.
func TestJobOptionsValidate(t *testing.T) {
	ok := []JobOptions{
		{Name: "j"},
		{Name: "j", Sharding: Dynamic, Share: true, Compression: "lz4"},
		{Name: "j", Coordinated: true, NumConsumers: 4, ConsumerIndex: 3, PadFinalRound: true},
		{Name: "j", Compression: "none"},
		{Name: "j", Sharding: Dynamic, Workers: AutoWorkers, MaxWorkers: 4},
		{Name: "j", Sharding: Dynamic, Share: true, Workers: "2"},
		{Name: "j", Sharding: Static, Workers: AllWorkers},
	}
	for _, o := range ok {
		if err := o.WithDefaults().Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, tc := range []struct {
		o    JobOptions
		want string
	}{
		{JobOptions{}, "Name is required"},
		{JobOptions{Name: "j", Sharding: "round-robin"}, `sharding: "round-robin"`},
		{JobOptions{Name: "j", Epochs: -2}, "epochs"},
		{JobOptions{Name: "j", NumConsumers: -1}, "num_consumers"},
		{JobOptions{Name: "j", GCAfter: -time.Second}, "gc_after"},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2, Sharding: Off}, "needs sharding dynamic"},
		{JobOptions{Name: "j", Coordinated: true}, "NumConsumers: coordinated reads need"},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 257}, "1..256"},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2, ConsumerIndex: 2}, "ConsumerIndex 2"},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2, Share: true}, "cannot be combined with share"},
		{JobOptions{Name: "j", PadFinalRound: true}, "only for coordinated"},
		{JobOptions{Name: "j", Compression: "brotli"}, "brotli"},
		{JobOptions{Name: "j", Sharding: Static, Share: true}, "not static"},
		{JobOptions{Name: "j", Workers: "many"}, `workers "many": want auto (the cluster chooses), all (every node) or a count >= 1`},
		{JobOptions{Name: "j", Workers: "0"}, `workers "0"`},
		{JobOptions{Name: "j", Workers: "-2"}, `workers "-2"`},
		{JobOptions{Name: "j", Workers: AutoWorkers}, "workers auto: only DYNAMIC jobs without share or coordinated reads autoscale; a job with sharding off"},
		{JobOptions{Name: "j", Sharding: Static, Workers: AutoWorkers}, "with sharding static (the worker list is fixed"},
		{JobOptions{Name: "j", Sharding: Dynamic, Share: true, Workers: AutoWorkers}, "with share (each worker produces for every sharing job) takes workers all or a fixed count"},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2, Workers: AutoWorkers}, "with coordinated reads"},
		{JobOptions{Name: "j", Coordinated: true, NumConsumers: 2, Autoscale: true}, "with coordinated reads"},
		{JobOptions{Name: "j", Sharding: Dynamic, Workers: AllWorkers, MaxWorkers: 2}, "workers all: contradicts max_workers 2"},
		{JobOptions{Name: "j", Sharding: Dynamic, Workers: "3", MaxWorkers: 2}, "workers 3: contradicts max_workers 2"},
		{JobOptions{Name: "j", Sharding: Dynamic, Workers: "3", Autoscale: true}, "workers 3: contradicts autoscale"},
		{JobOptions{Name: "j", Sharding: Dynamic, Workers: AllWorkers, Autoscale: true}, "workers all: contradicts autoscale"},
	} {
		err := tc.o.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want one containing %q", tc.o, err, tc.want)
		}
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
	var o JobOptions
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

// The wire keeps its integer keys: a message encoded with them decodes to
// the same value.
func TestDistributeRequestRoundTrip(t *testing.T) {
	in := DistributeRequest{Spec: []byte{1, 2}, Consumer: "c", Options: JobOptions{
		Name: "j", Sharding: Dynamic, Epochs: 2, NumConsumers: 3, MaxWorkers: 4, ConsumerTTL: time.Second,
		GCAfter: time.Minute, Share: true, Compression: "zstd",
	}}
	b, err := cbor.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out DistributeRequest
	if err := cbor.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Options, in.Options) || out.Consumer != in.Consumer || string(out.Spec) != string(in.Spec) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
	var keys map[int]cbor.RawMessage
	if err := cbor.Unmarshal(b, &keys); err != nil {
		t.Fatalf("top-level keys are not integers: %v", err)
	}
}

// A JobInfo encoded by another release (string keys where this one has
// integer keys, or the other way) decodes without error but with zero
// options; CheckJobInfo says so instead of letting a worker run a job of
// zero epochs.
func TestCheckJobInfoCatchesAnotherEncoding(t *testing.T) {
	type oldOptions struct { // the previous release's encoding: field names as keys
		Sharding string
		Epochs   int64
	}
	type oldInfo struct {
		Name    string
		Options oldOptions
	}
	b, err := cbor.Marshal(oldInfo{Name: "j", Options: oldOptions{Sharding: "dynamic", Epochs: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var got JobInfo
	if err := cbor.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := CheckJobInfo(got); !errors.Is(err, ErrVersionMismatch) || !strings.Contains(err.Error(), "releases") {
		t.Fatalf("CheckJobInfo(%+v) = %v, want ErrVersionMismatch", got, err)
	}
	ok := JobInfo{Name: "j", Options: JobOptions{Name: "j"}.WithDefaults()}
	if err := CheckJobInfo(ok); err != nil {
		t.Fatalf("CheckJobInfo of a defaulted job: %v", err)
	}
}

// TestAutoscaleTuningValidate: the autoscaling knobs are checked at the
// client, naming the option: out of range, or on a job that does not
// autoscale; in range on an autoscaling job they pass.
func TestAutoscaleTuningValidate(t *testing.T) {
	dyn := JobOptions{Name: "j", Sharding: Dynamic}
	for _, tc := range []struct {
		mod  func(*JobOptions)
		want string // "" passes
	}{
		{func(o *JobOptions) { o.AutoscaleThreshold, o.AutoscaleRevisit, o.AutoscalePause = 0.1, 20, -1 }, ""},
		{func(o *JobOptions) { o.AutoscaleThreshold = 1 }, "autoscale_threshold"},
		{func(o *JobOptions) { o.AutoscaleThreshold = -0.1 }, "autoscale_threshold"},
		{func(o *JobOptions) { o.AutoscaleRevisit = -1 }, "autoscale_revisit"},
		{func(o *JobOptions) { o.AutoscaleRevisit = MaxAutoscaleMetrics + 1 }, "autoscale_revisit"},
		{func(o *JobOptions) { o.AutoscalePause = -2 }, "autoscale_pause"},
		{func(o *JobOptions) { o.Workers, o.AutoscaleThreshold = AllWorkers, 0.1 }, "tune workers auto"},
		{func(o *JobOptions) { o.Workers, o.AutoscalePause = FixedWorkers(2), 3 }, "tune workers auto"},
	} {
		o := dyn
		tc.mod(&o)
		err := o.WithDefaults().Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error naming %s", o, err, tc.want)
		}
	}
}
