package mesh_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
)

// signedPart is consumer's checkpoint part of job id of job name, with
// the MAC its client computes under capability (client.Iterator.Checkpoint).
func signedPart(t *testing.T, capability []byte, name string, id uint64, consumer string, d ranges.Delivered) *api.ResumePart {
	t.Helper()
	r := &api.ResumePart{From: id, Part: consumer, Want: 1, Delivered: d}
	mac, err := api.CheckpointMAC(capability, name, *r)
	if err != nil {
		t.Fatal(err)
	}
	r.MAC = mac
	return r
}

// TestCheckpointNeedsTheClustersMAC (issue 37, item 3): the cluster
// checked a checkpoint's structure, never who made it, so anyone who may
// act on a job replaced it with a forged checkpoint. Now a checkpoint
// carries a MAC keyed by its consumer's capability, which only the
// cluster (holding the job's key) and that consumer have: a checkpoint
// with no MAC, a wrong one, one made with another consumer's capability,
// another job's, or another tenant's job's of the same name is refused
// (permission_denied, "not allowed") and the job is as it was; the
// honest checkpoint resumes it, and the resumed consumer streams with
// the capability its resume answered.
func TestCheckpointNeedsTheClustersMAC(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	mallory := newTenantClient(t, p, "mallory", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 1000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	distribute := func(who *tenantClient, name, consumer string, resume *api.ResumePart) (api.JobInfo, error) {
		var info api.JobInfo
		opts := api.JobOptions{Name: name, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers, Delivery: jobspec.ExactlyOnce, GCAfter: 200 * time.Millisecond}
		err := who.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: consumer, Resume: resume}, &info)
		return info, err
	}
	detach := func(who *tenantClient, name, consumer string) {
		if err := who.call(addr, api.MethodDetach, api.JobRequest{Job: name, Consumer: consumer}, nil); err != nil {
			t.Fatal(err)
		}
	}
	done := ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {0: {0, 100}}}}

	// Bob's job "shared-name", checkpointed, ends and is collected;
	// alice's job of the same name is then made (job names are per
	// tenant: it could coexist with bob's).
	bj, err := distribute(bob, "shared-name", "b0", nil)
	if err != nil {
		t.Fatal(err)
	}
	bobs := signedPart(t, bj.Capability, "shared-name", bj.ID, "b0", done)
	detach(bob, "shared-name", "b0")
	c.WaitFor(t, 20*time.Second, "bob's job collected", func() bool {
		_, err := c.Node(li).JobGet(context.Background(), "@nlp/shared-name")
		return errors.Is(err, transport.ErrNotFound)
	})
	if _, err := distribute(alice, "shared-name", "s0", nil); err != nil {
		t.Fatal(err)
	}
	detach(alice, "shared-name", "s0")

	// Alice's job "train", and another job of hers.
	first, err := distribute(alice, "train", "a0", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := distribute(alice, "other", "o0", nil)
	if err != nil {
		t.Fatal(err)
	}
	var own api.JobInfo // mallory's own consumer of alice's job
	if err := mallory.call(addr, api.MethodHeartbeat, api.JobRequest{Job: "train", Consumer: "m0"}, &own); err != nil {
		t.Fatal(err)
	}
	detach(mallory, "train", "m0")
	detach(alice, "train", "a0") // its consumers stopped: a resume may replace it
	honest := signedPart(t, first.Capability, "train", first.ID, "a0", done)
	noMAC := *honest
	noMAC.MAC = nil
	wrongMAC := *honest
	wrongMAC.MAC = make([]byte, len(honest.MAC))
	if _, err := rand.Read(wrongMAC.MAC); err != nil {
		t.Fatal(err)
	}
	tampered := signedPart(t, first.Capability, "train", first.ID, "a0", done)
	tampered.Delivered = ranges.Delivered{DoneBefore: 1} // "all delivered", under the honest MAC
	ownCap := signedPart(t, own.Capability, "train", first.ID, "a0", done)
	otherJob := signedPart(t, other.Capability, "other", other.ID, "o0", done)
	otherJob.From = first.ID
	for _, tc := range []struct {
		what string
		who  *tenantClient
		job  string
		r    *api.ResumePart
		want string
	}{
		{"a checkpoint without a MAC (format 1, or forged)", mallory, "train", &noMAC, "carries no MAC"},
		{"a forged MAC", mallory, "train", &wrongMAC, "not allowed"},
		{"the honest checkpoint, its delivered set changed", mallory, "train", tampered, "not allowed"},
		{"a checkpoint signed with her own consumer's capability", mallory, "train", ownCap, "not allowed"},
		{"another job's checkpoint", alice, "train", otherJob, "not allowed"},
		{"another tenant's checkpoint of a job of the same name", alice, "shared-name", bobs, "not allowed"},
	} {
		_, err := distribute(tc.who, tc.job, "r1", tc.r)
		if !errors.Is(err, transport.ErrPermissionDenied) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("resume of %q from %s: %v, want permission_denied saying %q", tc.job, tc.what, err, tc.want)
		}
	}
	got, err := c.Node(li).JobGet(context.Background(), "@vision/train")
	if err != nil || got.Job.ID != first.ID {
		t.Fatalf("after the refused resumes job train is %+v (%v), want id %d", got.Job, err, first.ID)
	}
	// The honest checkpoint resumes the job; its new consumer streams.
	resumed, err := distribute(alice, "train", "a1", honest)
	if err != nil {
		t.Fatalf("resume from the honest checkpoint: %v", err)
	}
	if resumed.ID == first.ID {
		t.Fatalf("the resume did not replace the job (id %d)", resumed.ID)
	}
	if err := alice.firstBatch(addr, "train", resumed.ID, "a1", resumed.Capability); err != nil {
		t.Errorf("the resumed consumer reads: %v", err)
	}
}
