package api

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// The wire keeps its integer keys: a message encoded with them decodes to
// the same value.
func TestDistributeRequestRoundTrip(t *testing.T) {
	in := DistributeRequest{Spec: []byte{1, 2}, Consumer: "c", Options: JobOptions{
		Name: "j", Sharding: jobspec.Dynamic, Epochs: 2, NumConsumers: 3, MaxWorkers: 4, ConsumerTTL: time.Second,
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
	n, err := JobOptions{Name: "j"}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	ok := JobInfo{Name: "j", Options: n.Job().Options()}
	if err := CheckJobInfo(ok); err != nil {
		t.Fatalf("CheckJobInfo of a defaulted job: %v", err)
	}
}

// The previous release's encodings (recorded from it, before JobOptions
// moved to jobspec): an older client's distribute requests decode to the
// same options, and normalize as that client meant them; a JobInfo from
// an older node decodes.
const (
	// Coordinated, consumer index 1, zstd, workers 4, offload remote,
	// local_cpus 1.5.
	oldRequest = "a30142010202af01616a026764796e616d6963030204030504061a3b9aca00071b0000000df847580009f50a010bf50c647a7374640d6c65786163746c792d6f6e63650f613418286672656d6f74651829fb3ff800000000000003626331"
	// Workers auto with its knobs, offload fraction=0.3 and a cut after 2
	// ops, which that release refused too.
	oldRequest2 = "a301410302ad01616b026764796e616d69630301061b00000006fc23ac00071b0000000df84758000d6c65786163746c792d6f6e63650ef50f646175746f10fb3fa999999999999a1104122018286c6672616374696f6e3d302e33182a0203626332"
	// A sharing job's info, with its (empty) name in the options.
	oldInfo = "ad62696407646e616d65616b6b66696e6765727072696e74626670676f7074696f6e73a90160026764796e616d69630301061b00000006fc23ac00071b0000000df847580008f50c636c7a340d6c61742d6d6f73742d6f6e63650f63616c6c69636f6e73756d657273f667776f726b657273f66a6e756d5f73706c697473006565706f6368006d73706c6974735f6c6561736564006f73706c6974735f66696e6973686564006b73706c6974735f6c6f7374006a637265617465645f6174f665737461746560"
)

func TestOlderReleaseMessagesDecode(t *testing.T) {
	decode := func(h string, v any) {
		t.Helper()
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := cbor.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", h[:16], err)
		}
	}
	for _, tc := range []struct {
		hex      string
		consumer string
		want     JobOptions
		refused  string // what Normalize says (the old release said the same)
	}{
		{oldRequest, "c1", JobOptions{Name: "j", Sharding: jobspec.Dynamic, Epochs: 2, NumConsumers: 3, MaxWorkers: 4, ConsumerTTL: time.Second,
			GCAfter: time.Minute, Coordinated: true, ConsumerIndex: 1, PadFinalRound: true, Compression: "zstd", Delivery: jobspec.ExactlyOnce,
			Workers: "4", Offload: "remote", LocalCPUs: 1.5}, ""},
		{oldRequest2, "c2", JobOptions{Name: "k", Sharding: jobspec.Dynamic, Epochs: 1, ConsumerTTL: 30 * time.Second, GCAfter: time.Minute,
			Delivery: jobspec.ExactlyOnce, Autoscale: true, Workers: jobspec.AutoWorkers, AutoscaleThreshold: 0.05, AutoscaleRevisit: 4,
			AutoscalePause: -1, Offload: "fraction=0.3", OffloadBoundary: 2}, "offload_boundary 2 with offload fraction=0.3: a cut runs the ops before it on the nodes only"},
	} {
		var req DistributeRequest
		decode(tc.hex, &req)
		if !reflect.DeepEqual(req.Options, tc.want) || req.Consumer != tc.consumer {
			t.Fatalf("old request decodes to %+v (consumer %q), want %+v", req.Options, req.Consumer, tc.want)
		}
		n, err := req.Options.Normalize()
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("normalize: %v, want %q", err, tc.refused)
			}
			continue
		}
		if err != nil {
			t.Fatalf("an old client's request does not normalize: %v", err)
		}
		// The old client sent its options normalized: the node keeps them.
		if got, want := n.Options(), tc.want; !reflect.DeepEqual(got, want) {
			t.Errorf("normalized to %+v, want %+v", got, want)
		}
	}
	var info JobInfo
	decode(oldInfo, &info)
	if info.ID != 7 || info.Options.Sharding != jobspec.Dynamic || !info.Options.Share || info.Options.Compression != "lz4" || CheckJobInfo(info) != nil {
		t.Fatalf("old info decodes to %+v", info)
	}
}
