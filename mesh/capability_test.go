package mesh_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// TestStreamNeedsItsCapability (issue 37, item 3): a job's name and a
// consumer id were enough to open a data stream and take the job's
// batches. Now a stream carries the capability the consumer's attach
// answered: a client of the job's own tenant that knows the name and the
// consumer id, but not the capability, gets no batch from any node
// (without one, with a wrong one, with its own consumer's); a renewal
// does not answer the capability; the legitimate consumer reads from
// every node, after its leader was killed, and from the killed node once
// it is back.
func TestStreamNeedsItsCapability(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	follower := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	mallory := newTenantClient(t, p, "mallory", "vision", false) // alice's own tenant

	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 3000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	const job = "vision-train"
	opts := api.JobOptions{Name: job, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	var info api.JobInfo
	if err := alice.call(follower, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "a0"}, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Capability) != api.CapabilityBytes {
		t.Fatalf("the distribute answered a capability of %d bytes, want %d", len(info.Capability), api.CapabilityBytes)
	}
	// Mallory attaches a consumer of her own (her tenant may): its
	// capability is not a0's.
	var own api.JobInfo
	if err := mallory.call(follower, api.MethodHeartbeat, api.JobRequest{Job: job, Consumer: "m0"}, &own); err != nil {
		t.Fatal(err)
	}
	if len(own.Capability) != api.CapabilityBytes || bytes.Equal(own.Capability, info.Capability) {
		t.Fatalf("mallory's attach answered capability of %d bytes, equal to a0's: %v", len(own.Capability), bytes.Equal(own.Capability, info.Capability))
	}
	var renewed api.JobInfo
	if err := mallory.call(follower, api.MethodHeartbeat, api.JobRequest{Job: job, Consumer: "a0"}, &renewed); err != nil {
		t.Fatal(err)
	}
	if len(renewed.Capability) != 0 {
		t.Fatal("a heartbeat renewing a0 (not attaching it) answered its capability")
	}
	wrong := make([]byte, api.CapabilityBytes)
	if _, err := rand.Read(wrong); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		addr := c.Node(i).Addr()
		for _, try := range []struct {
			what string
			cap  []byte
		}{{"no capability", nil}, {"a wrong capability", wrong}, {"her own consumer's capability", own.Capability}, {"a cut capability", info.Capability[:16]}} {
			if err := mallory.firstBatch(addr, job, info.ID, "a0", try.cap); err == nil || !strings.Contains(err.Error(), "not allowed") {
				t.Errorf("mallory reads a0's stream from %s with %s: %v, want not allowed", c.Name(i), try.what, err)
			}
		}
		if err := alice.firstBatch(addr, job, info.ID, "a0", info.Capability); err != nil {
			t.Errorf("alice reads a0's stream from %s: %v", c.Name(i), err)
		}
	}
	if err := mallory.firstBatch(follower, job, info.ID, "m0", own.Capability); err != nil {
		t.Errorf("mallory reads her own consumer's stream: %v", err)
	}
	// Only nodes ask the leader whether a capability checks out.
	if err := mallory.call(follower, api.MethodCapabilityCheck, api.CapabilityCheckRequest{Job: job, Consumer: "a0", Capability: wrong}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a client asks whether a capability checks out: %v, want permission_denied", err)
	}

	// The leader dies: the capability holds on the others, and on the
	// node once it is back.
	c.Kill(li)
	nl, _ := c.WaitLeader(t, 30*time.Second)
	if err := alice.call(c.Node(nl).Addr(), api.MethodHeartbeat, api.JobRequest{Job: job, Consumer: "a0"}, nil); err != nil {
		t.Fatalf("a0 renews through the new leader: %v", err)
	}
	for _, i := range c.Running() {
		if err := alice.firstBatch(c.Node(i).Addr(), job, info.ID, "a0", info.Capability); err != nil {
			t.Errorf("alice reads a0's stream from %s after the leader died: %v", c.Name(i), err)
		}
	}
	if err := c.Restart(li); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 30*time.Second, "the restarted node serves a0's stream", func() bool {
		return alice.firstBatch(c.Node(li).Addr(), job, info.ID, "a0", info.Capability) == nil
	})
	if err := mallory.firstBatch(c.Node(li).Addr(), job, info.ID, "a0", nil); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("mallory reads a0's stream from the restarted node without its capability: %v, want not allowed", err)
	}
}

// TestStreamNeedsItsCapabilityInDevMode: in dev mode (no certificates)
// anyone is the anonymous administrator on the control plane, but a job's
// name and a consumer id still stream nothing: a stream needs the
// consumer's capability, which only the attach answers. Every node
// checks, the one outside Raft (no replica of the state: it asks the
// leader) too.
func TestStreamNeedsItsCapabilityInDevMode(t *testing.T) {
	const n = 4
	c := testcluster.Start(t, n, testcluster.WithVoters(3))
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % n).Addr()
	c.WaitFor(t, 20*time.Second, "a node outside Raft", func() bool {
		for i := range n {
			if c.Node(i).Status().Role == "none" {
				return true
			}
		}
		return false
	})
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	tr, err := transport.New(pc, nil, mustClientTLS(t), transport.FastConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	codec, err := transport.NewCodec(transport.DefaultConfig().MaxHeaderBytes, transport.DefaultConfig().MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	anyone := &tenantClient{t: t, tr: tr, codec: codec}
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 1000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	var info api.JobInfo
	opts := api.JobOptions{Name: "dev-job", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	if err := anyone.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, &info); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := anyone.firstBatch(c.Node(i).Addr(), "dev-job", info.ID, "c0", nil); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("a stream of c0 without its capability from %s: %v, want not allowed", c.Name(i), err)
		}
		if err := anyone.firstBatch(c.Node(i).Addr(), "dev-job", info.ID, "c0", info.Capability); err != nil {
			t.Errorf("c0's stream with its capability from %s: %v", c.Name(i), err)
		}
	}
	// Nor may a client read the cluster's secret from the KV store, an
	// administrator (here: anyone) included.
	if err := anyone.call(addr, api.MethodGet, api.GetRequest{Key: "feedmesh.internal/job-secret", Stale: true}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("kv.get of the job secret: %v, want permission_denied", err)
	}
	if err := anyone.call(addr, api.MethodPut, api.PutRequest{Key: "feedmesh.internal/job-secret", Value: make([]byte, 32)}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("kv.put of the job secret: %v, want permission_denied", err)
	}
}
