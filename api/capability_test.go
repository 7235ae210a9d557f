package api

import (
	"bytes"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/ranges"
)

// TestCheckpointMACSurvivesEncoding: the client computes a checkpoint's
// MAC on its own part, the leader on the part as it decoded it from the
// checkpoint and the RPC: encoding and decoding (nil or empty containers
// alike) must not change it; any change of what the part says, of the
// job name, or of the capability must.
func TestCheckpointMACSurvivesEncoding(t *testing.T) {
	capability := Capability([]byte("job key"), "c0")
	part := ResumePart{From: 7, Part: "c0", Want: 2, Delivered: ranges.Delivered{DoneBefore: 1,
		Missing:  map[int64]map[int64]ranges.Set{0: {3: {4, 9}}},
		Returned: map[int64]map[int64]ranges.Set{1: {0: {0, 10}, 5: {2, 3}}, 2: {}}}}
	mac, err := CheckpointMAC(capability, "train", part)
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []cbor.EncOptions{{}, cbor.CoreDetEncOptions(), {NilContainers: cbor.NilContainerAsEmpty}} {
		em, err := enc.EncMode()
		if err != nil {
			t.Fatal(err)
		}
		b, err := em.Marshal(part)
		if err != nil {
			t.Fatal(err)
		}
		var back ResumePart
		if err := cbor.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got, _ := CheckpointMAC(capability, "train", back); !bytes.Equal(got, mac) {
			t.Errorf("the part encoded with %+v and decoded has another MAC", enc)
		}
	}
	empty := ResumePart{From: 7, Part: "c0", Want: 1}
	emptied := empty
	emptied.Delivered.Missing, emptied.Delivered.Returned = map[int64]map[int64]ranges.Set{}, map[int64]map[int64]ranges.Set{}
	a, _ := CheckpointMAC(capability, "train", empty)
	b, _ := CheckpointMAC(capability, "train", emptied)
	if !bytes.Equal(a, b) {
		t.Error("nil and empty delivered sets have other MACs")
	}
	changed := []struct {
		what string
		cap  []byte
		job  string
		r    ResumePart
	}{
		{"another capability", Capability([]byte("job key"), "c1"), "train", part},
		{"another job key", Capability([]byte("other key"), "c0"), "train", part},
		{"another job name", capability, "train2", part},
		{"another job id", capability, "train", func() ResumePart { r := part; r.From = 8; return r }()},
		{"another consumer", capability, "train", func() ResumePart { r := part; r.Part = "c1"; return r }()},
		{"another consumer count", capability, "train", func() ResumePart { r := part; r.Want = 1; return r }()},
		{"another delivered set", capability, "train", func() ResumePart { r := part; r.Delivered.DoneBefore = 2; return r }()},
	}
	for _, c := range changed {
		if got, _ := CheckpointMAC(c.cap, c.job, c.r); bytes.Equal(got, mac) {
			t.Errorf("%s: the same MAC", c.what)
		}
	}
	if _, err := CheckpointMAC(nil, "train", part); err == nil {
		t.Error("a MAC without a capability")
	}
}
