package mesh

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// Job keys, capabilities and checkpoint MACs (docs/operating/security.md,
// "Capabilities and checkpoint MACs"; api/capability.go has the client's
// side).
//
// The cluster keeps one secret, 32 random bytes, in its Raft state (the
// KV entry jobSecretKey, which the first leader that needs it writes once
// with PutKVIfAbsent, and which no client may read or write). A job's key
// is the HMAC of its tenant and name under that secret: every node
// derives it from its own replica, it never leaves the cluster, and it is
// the same for every run of the name in the tenant (a resume replaces the
// job, and a job collected after its last consumer left may be resumed
// later from a checkpoint: its key is still the one the checkpoint was
// made under). A tenant's job key is another tenant's job of the same
// name's, and another job's, never.

// jobSecretKey is the KV entry holding the cluster's secret. KV keys
// under reservedKVPrefix are the cluster's: kv.put and kv.get refuse them
// to every caller (noReservedKey).
const (
	reservedKVPrefix = "feedmesh.internal/"
	jobSecretKey     = reservedKVPrefix + "job-secret"
	jobSecretBytes   = 32
)

// localJobSecret is the secret in this node's replica, if it has one
// (of the right size).
func (n *Node) localJobSecret() ([]byte, bool) {
	s, _, ok := n.localJobSecretSince()
	return s, ok
}

// localJobSecretSince is the secret and when it was made (the proposing
// leader's clock; zero for a secret recorded without it): the entry is
// the secret, then the time in Unix nanoseconds (8 bytes, big-endian).
// A job created before it was made (a rolling upgrade's, created by a
// leader of a release without capabilities) has consumers that hold
// none: checkCapability serves them as that release did.
func (n *Node) localJobSecretSince() ([]byte, time.Time, bool) {
	v, ok := n.raft.Get(jobSecretKey)
	switch {
	case ok && len(v) == jobSecretBytes:
		return v, time.Time{}, true
	case ok && len(v) == jobSecretBytes+8:
		return v[:jobSecretBytes], time.Unix(0, int64(binary.BigEndian.Uint64(v[jobSecretBytes:]))), true
	}
	return nil, time.Time{}, false
}

// ensureJobSecret (on the leader) returns the cluster's secret, writing
// it first if the state has none: PutKVIfAbsent, so that two leaders (one
// deposed) writing at once agree on the first.
func (n *Node) ensureJobSecret(ctx context.Context) ([]byte, error) {
	if s, ok := n.localJobSecret(); ok {
		return s, nil
	}
	s := make([]byte, jobSecretBytes, jobSecretBytes+8)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	s = binary.BigEndian.AppendUint64(s, uint64(time.Now().UnixNano()))
	if _, err := n.raft.Apply(ctx, fsm.NewPutKVIfAbsent(jobSecretKey, s)); err != nil {
		return nil, fmt.Errorf("record the cluster's job secret: %w", err)
	}
	if s, ok := n.localJobSecret(); ok {
		return s, nil
	}
	return nil, transport.Errorf(transport.ErrUnavailable, "the cluster's job secret is malformed in the state (%s)", jobSecretKey)
}

// capabilitiesOn reports whether the cluster issues and checks
// capabilities and checkpoint MACs: once its secret exists (in this
// node's replica), or once every Raft server runs a release with them
// (ProtocolCapabilities), which makes the secret. The secret decides
// first: a node just restarted counts the servers gossip has not told
// it about yet at the legacy level for a moment, and must not stop
// checking (nor issuing) in that moment.
func (n *Node) capabilitiesOn() bool {
	if _, ok := n.localJobSecret(); ok {
		return true
	}
	return n.clusterProtocol() >= fsm.ProtocolCapabilities
}

// jobKey is the key of tenant's job name under secret. name is the
// job's short name (shortJobName): keys, so capabilities and checkpoint
// MACs, are what they were before job names were per tenant.
func jobKey(secret []byte, tenant, name string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("feedmesh job key v1\x00"))
	var l [binary.MaxVarintLen64]byte
	m.Write(l[:binary.PutUvarint(l[:], uint64(len(tenant)))])
	m.Write([]byte(tenant))
	m.Write([]byte(name))
	return m.Sum(nil)
}

// capabilityFor (on the leader) is consumer's capability of tenant's
// job name.
// Before the cluster has capabilities (capabilitiesOn: during a rolling
// upgrade from a release without them, whose nodes may lead and answer
// none) it answers none, and writes no secret.
func (n *Node) capabilityFor(ctx context.Context, tenant, name, consumer string) ([]byte, error) {
	if !n.capabilitiesOn() {
		return nil, nil
	}
	s, err := n.ensureJobSecret(ctx)
	if err != nil {
		return nil, err
	}
	return api.Capability(jobKey(s, tenant, shortJobName(tenant, name)), consumer), nil
}

// checkCapability (on a worker) refuses a data stream of consumer of job
// whose Open did not carry the consumer's capability, compared in
// constant time. A worker whose replica holds the cluster's secret checks
// it itself; another (not a Raft server, or its replica behind) asks the
// leader, once per consumer and capability (capCache). The capability is
// never logged nor echoed.
//
// A stream without a capability is served where the cluster never gave
// its consumer one (heldNoCapability): until every Raft server runs a
// release with capabilities (ProtocolCapabilities) a leader of the older
// release answers none, and a job created before the cluster's secret (a
// rolling upgrade's) keeps consumers that hold none. Those streams are
// checked as that release did: their tenant, not their consumer.
func (n *Node) checkCapability(ctx context.Context, job api.JobInfo, consumer string, capability []byte) error {
	if len(capability) == 0 && !n.capabilitiesOn() {
		return nil
	}
	var ok bool
	if s, since, has := n.localJobSecretSince(); has && len(capability) == 0 {
		// A job's creation time may reach a worker in whole seconds
		// (CBOR's time): compare whole seconds, so that a job of the
		// secret's second counts as one after it.
		ok = job.CreatedAt.Before(since.Truncate(time.Second))
	} else if has {
		ok = hmac.Equal(capability, api.Capability(jobKey(s, job.Tenant, shortJobName(job.Tenant, job.Name)), consumer))
	} else if ok = n.caps.has(job, consumer, capability); !ok {
		var resp api.CapabilityCheckResponse
		ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
		defer cancel()
		if err := n.capabilityCheck(ctx, api.CapabilityCheckRequest{Job: job.Name, Consumer: consumer, Capability: capability}, &resp); err != nil {
			return fmt.Errorf("worker %s could not have the leader check the stream's capability: %w", n.name, err)
		}
		if ok = resp.OK; ok {
			n.caps.add(job, consumer, capability)
		}
	}
	switch {
	case !ok && len(capability) == 0:
		return fmt.Errorf("permission denied: not allowed: consumer %q of job %q opened a data stream without its capability (the distribute or attach that attached it answers one; a client of an older release sends none: upgrade it)", consumer, job.Name)
	case !ok:
		return fmt.Errorf("permission denied: not allowed: the data stream's capability is not consumer %q's of job %q", consumer, job.Name)
	}
	return nil
}

// capabilityCheck answers api.MethodCapabilityCheck on the leader: OK if
// the capability is the consumer's, or if there is none and the cluster
// never gave the consumer one (heldNoCapability).
func (n *Node) capabilityCheck(ctx context.Context, req api.CapabilityCheckRequest, resp *api.CapabilityCheckResponse) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodCapabilityCheck, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, resp,
		func(ctx context.Context) error {
			view, exists := n.raft.Job(req.Job)
			if !exists {
				return transport.Errorf(transport.ErrNotFound, "job %q not found", req.Job)
			}
			if len(req.Capability) == 0 {
				resp.OK = n.heldNoCapability(view.CreatedAt)
				return nil
			}
			c, err := n.capabilityFor(ctx, fsm.TenantOf(view.Owner), req.Job, req.Consumer)
			if err != nil {
				return err
			}
			resp.OK = c == nil || hmac.Equal(req.Capability, c) // nil: below ProtocolCapabilities, nothing to check
			return nil
		})
}

// heldNoCapability (on the leader) reports whether the consumers of a job
// created at createdAt (Unix nanoseconds) may hold no capability: the
// cluster has no secret yet (it gave no capability: below
// ProtocolCapabilities it makes none), or made its secret after the job.
func (n *Node) heldNoCapability(createdAt int64) bool {
	_, since, ok := n.localJobSecretSince()
	return !ok || createdAt < since.UnixNano()
}

// maxCachedCapabilities bounds a worker's capCache.
const maxCachedCapabilities = 4096

// capCache is the capabilities the leader confirmed to a worker that
// cannot check them itself, by tenant, job and consumer: a consumer's
// next streams (a coordinated read opens one a round) ask nothing more.
// Bounded: once full, it is emptied.
type capCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func capCacheKey(job api.JobInfo, consumer string) string {
	return job.Tenant + "\x00" + job.Name + "\x00" + consumer
}

func (c *capCache) has(job api.JobInfo, consumer string, capability []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[capCacheKey(job, consumer)]
	return ok && hmac.Equal(v, capability)
}

func (c *capCache) add(job api.JobInfo, consumer string, capability []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedCapabilities {
		c.m = map[string][]byte{}
	}
	c.m[capCacheKey(job, consumer)] = append([]byte(nil), capability...)
}

// checkCheckpointMAC (on the leader) refuses a resume whose checkpoint's
// MAC is not the one the cluster computes for tenant's job name:
// forged, of another tenant's job or of another job, or of a format
// before MACs.
//
// Before the cluster has capabilities (capabilitiesOn: a rolling
// upgrade) it has no MACs to check against: a checkpoint's MAC is not
// checked, as by the older release.
//
// An administrator (dev mode's anonymous caller among them) may resume a
// checkpoint whose MAC does not check out, as one made by another
// cluster (its own secret: a cluster recreated after a preemption, a
// checkpoint carried to a test cluster): it is logged, and goes on. An
// administrator may act on every tenant's jobs anyway.
func (n *Node) checkCheckpointMAC(ctx context.Context, tenant, name string, r *api.ResumePart) error {
	if !n.capabilitiesOn() {
		return nil
	}
	err := n.verifyCheckpointMAC(ctx, tenant, name, r)
	if p := principal(ctx); err != nil && p.Privileged() {
		n.log.Warn("resume of a checkpoint whose MAC does not check out (another cluster's, or before MACs), allowed to an administrator", "principal", p.Name, "tenant", tenant, "job", logString(name), "part", logString(r.Part))
		return nil
	}
	return err
}

func (n *Node) verifyCheckpointMAC(ctx context.Context, tenant, name string, r *api.ResumePart) error {
	if len(r.MAC) == 0 {
		return transport.Errorf(transport.ErrPermissionDenied, "job %q: resume: not allowed: the checkpoint of consumer %q carries no MAC (checkpoint format 1, written before checkpoints were signed by the cluster, or not a feedmesh client's): format 1 checkpoints are refused; read the dataset afresh", name, r.Part)
	}
	c, err := n.capabilityFor(ctx, tenant, name, r.Part)
	if err != nil {
		return err
	}
	// The client MACs the name it knows the job by: its tenant's short
	// name, or an administrator's "@tenant/name". Either needs the
	// consumer's capability.
	ok := false
	for _, as := range []string{shortJobName(tenant, name), name} {
		want, err := api.CheckpointMAC(c, as, *r)
		if err != nil {
			return err
		}
		ok = ok || hmac.Equal(r.MAC, want)
	}
	if !ok {
		n.log.Warn("resume refused: the checkpoint's MAC does not check out", "tenant", tenant, "job", logString(name), "part", logString(r.Part))
		return transport.Errorf(transport.ErrPermissionDenied, "job %q: resume: not allowed: the checkpoint of consumer %q was not made by a consumer of this job (forged, another tenant's, or another job's checkpoint)", name, r.Part)
	}
	return nil
}

// noReservedKey refuses kv.put and kv.get of the cluster's own entries
// (reservedKVPrefix) to every caller: an administrator's too (the job
// secret is never sent to a client).
func noReservedKey[Req any](key func(Req) string, f func(context.Context, Req) (any, error)) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) {
		if k := key(req); strings.HasPrefix(k, reservedKVPrefix) {
			return nil, transport.Errorf(transport.ErrPermissionDenied, "key %q: keys under %q are the cluster's own", logString(k), reservedKVPrefix)
		}
		return f(ctx, req)
	}
}
