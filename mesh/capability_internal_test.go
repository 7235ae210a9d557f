package mesh

import (
	"bytes"
	"crypto/hmac"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/ranges"
)

// TestJobKeys: a job's key is its tenant's and name's, and no other's
// (the tenant and the name cannot be shifted into each other).
func TestJobKeys(t *testing.T) {
	s := bytes.Repeat([]byte{7}, jobSecretBytes)
	k := jobKey(s, "vision", "train")
	for _, o := range []struct{ secret, tenant, name string }{
		{string(s), "nlp", "train"}, {string(s), "vision", "train2"}, {string(s), "", "train"},
		{string(s), "visio", "ntrain"}, {string(s), "vision", ""}, {string(bytes.Repeat([]byte{8}, jobSecretBytes)), "vision", "train"},
	} {
		if bytes.Equal(jobKey([]byte(o.secret), o.tenant, o.name), k) {
			t.Errorf("job %q of tenant %q has vision's train's key", o.name, o.tenant)
		}
	}
	if !bytes.Equal(jobKey(s, "vision", "train"), k) {
		t.Error("a job's key changed")
	}
}

// BenchmarkCapabilityCheck: what a worker's check of a stream's
// capability costs (the job's key, the consumer's capability, a constant-
// time compare), and a leader's check of a checkpoint's MAC, against a
// control round trip of about a millisecond.
func BenchmarkCapabilityCheck(b *testing.B) {
	s := bytes.Repeat([]byte{7}, jobSecretBytes)
	capability := api.Capability(jobKey(s, "vision", "train"), "c0")
	b.Run("stream", func(b *testing.B) {
		for range b.N {
			if !hmac.Equal(capability, api.Capability(jobKey(s, "vision", "train"), "c0")) {
				b.Fatal("the capability does not check out")
			}
		}
	})
	b.Run("checkpoint", func(b *testing.B) {
		d := ranges.Delivered{DoneBefore: 1, Returned: map[int64]map[int64]ranges.Set{1: {}}}
		for i := range int64(100) { // a consumer half way through an epoch of 200 splits
			d.Returned[1][i] = ranges.Set{0, 100}
		}
		part := api.ResumePart{From: 7, Part: "c0", Want: 1, Delivered: d}
		mac, err := api.CheckpointMAC(capability, "train", part)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			c := api.Capability(jobKey(s, "vision", "train"), "c0")
			got, err := api.CheckpointMAC(c, "train", part)
			if err != nil || !hmac.Equal(got, mac) {
				b.Fatal("the MAC does not check out")
			}
		}
	})
}
