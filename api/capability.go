package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/feedmesh/feedmesh/ranges"
	"github.com/fxamacker/cbor/v2"
)

// Capabilities and checkpoint MACs (docs/operating/security.md,
// "Capabilities and checkpoint MACs").
//
// The cluster holds a key per job (mesh: derived from a secret in its
// Raft state, the job's tenant and name; never sent to a client). The
// distribute or heartbeat that attaches a consumer answers its
// capability, the HMAC-SHA256 of the consumer's id under the job's key
// (JobInfo.Capability). A data stream carries it (batch.OpenRequest),
// and a worker serves the stream only if it is the capability of the
// Open's consumer. A checkpoint carries a MAC (CheckpointMAC) under a
// key derived from its consumer's capability: the cluster recomputes it
// on resume, so that only a holder of that consumer's capability, of
// this tenant's job of this name, could have made it.

// CapabilityBytes is a capability's length.
const CapabilityBytes = sha256.Size

// Capability is consumer's capability under jobKey.
func Capability(jobKey []byte, consumer string) []byte {
	m := hmac.New(sha256.New, jobKey)
	m.Write([]byte("feedmesh stream capability v1\x00"))
	m.Write([]byte(consumer))
	return m.Sum(nil)
}

// ErrNoCapability: a checkpoint MAC asked for with no capability (a
// consumer attached through a node of an older release, which answers
// none).
var ErrNoCapability = errors.New("the cluster gave this consumer no capability (a node of an older release answered its attach)")

// macInput is what a checkpoint's MAC covers: the job's name and the
// part the cluster takes (ResumePart without its MAC).
type macInput struct {
	Job       string           `cbor:"1,keyasint"`
	From      uint64           `cbor:"2,keyasint"`
	Part      string           `cbor:"3,keyasint"`
	Want      int              `cbor:"4,keyasint"`
	Delivered ranges.Delivered `cbor:"5,keyasint"`
}

// macEncoding is deterministic (sorted map keys, shortest forms), an
// empty container and an absent one alike, so that the client that takes
// a checkpoint and the leader that checks it encode the part to the same
// bytes whatever decoding went between.
var macEncoding = func() cbor.EncMode {
	o := cbor.CoreDetEncOptions()
	o.NilContainers = cbor.NilContainerAsEmpty
	m, err := o.EncMode()
	if err != nil {
		panic(err) // static options
	}
	return m
}()

// CheckpointMAC is the MAC of consumer r.Part's checkpoint of job (r's
// MAC ignored), under capability, r.Part's capability.
func CheckpointMAC(capability []byte, job string, r ResumePart) ([]byte, error) {
	if len(capability) == 0 {
		return nil, ErrNoCapability
	}
	body, err := macEncoding.Marshal(macInput{Job: job, From: r.From, Part: r.Part, Want: r.Want, Delivered: r.Delivered})
	if err != nil {
		return nil, fmt.Errorf("checkpoint MAC: %w", err)
	}
	k := hmac.New(sha256.New, capability)
	k.Write([]byte("feedmesh checkpoint key v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte("feedmesh checkpoint v2\x00"))
	m.Write(body)
	return m.Sum(nil), nil
}

// MethodCapabilityCheck (CapabilityCheckRequest → CapabilityCheckResponse)
// is a worker asking the leader whether a data stream's capability is its
// consumer's, when the worker holds no replica of the cluster state (not
// a Raft server) or its replica lacks the cluster's secret yet. Only nodes
// ask it (under mutual TLS); the answer is yes or no.
const MethodCapabilityCheck = "job.capability"

// CapabilityCheckRequest asks whether Capability is Consumer's of Job.
type CapabilityCheckRequest struct {
	Job        string     `cbor:"1,keyasint"`
	Consumer   string     `cbor:"2,keyasint"`
	Capability []byte     `cbor:"3,keyasint"`
	Forwarded  bool       `cbor:"4,keyasint,omitempty"`
	Caller     *Principal `cbor:"40,keyasint,omitempty"`
}

// CapabilityCheckResponse answers a CapabilityCheckRequest.
type CapabilityCheckResponse struct {
	OK bool `cbor:"1,keyasint"`
}

func (r CapabilityCheckRequest) WasForwarded() bool          { return r.Forwarded }
func (r CapabilityCheckRequest) ForwardedFor() *Principal    { return r.Caller }
func (r CapabilityCheckRequest) WithCaller(p *Principal) any { r.Caller = p; return r }
