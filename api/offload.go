package api

import "github.com/feedmesh/feedmesh/api/jobspec"

// MethodOffload (OffloadRequest): a consumer assigns its local worker to
// the job, turns the nodes' part of it off or on, and reports its
// offload for `feedmesh jobs`. Answered by the leader.
const MethodOffload = "job.offload"

// OffloadRequest is MethodOffload's request.
type OffloadRequest struct {
	Job         string `cbor:"1,keyasint"`
	Consumer    string `cbor:"2,keyasint"`
	LocalWorker bool   `cbor:"3,keyasint,omitempty"`
	// Remote: "on", "off", or "" (unchanged).
	Remote    string         `cbor:"4,keyasint,omitempty"`
	Report    *OffloadReport `cbor:"5,keyasint,omitempty"`
	Forwarded bool           `cbor:"6,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// Retire ends the consumer's local worker while the consumer reads
	// on (exactly-once jobs): what it leased and did not deliver goes to
	// the nodes once the consumer fences it (its receipts tell what it
	// delivered). Offload auto retires it when another consumer joins.
	Retire bool `cbor:"7,keyasint,omitempty"`
	// Cut cuts the running job's pipeline after that many ops (offload
	// auto's "which ops", decided from the job's first measurements):
	// the splits leased from then on run the ops before it on the
	// nodes, which ship single elements marked with a CutHeader; the
	// consumer runs the rest. The job's only consumer may ask, once, in
	// an exactly-once job with no cut yet.
	Cut int `cbor:"8,keyasint,omitempty"`
}

// CutHeader is the Header.Extra of an element a node ships for a cut
// job: the ops it ran (the cut). A batch without it went through the
// whole pipeline (a split leased before the job was cut, or the
// consumer's local worker).
type CutHeader struct {
	Cut int `cbor:"1,keyasint"`
}

// OffloadReport is a consumer's offload as `feedmesh jobs` shows it.
type OffloadReport struct {
	// Mode is the decision in force: remote, local, or fraction=F.
	Mode string `cbor:"1,keyasint" json:"mode"`
	// Fraction is the share of elements the local worker prepares.
	Fraction float64 `cbor:"2,keyasint" json:"fraction"`
	// Cut is the offload boundary (0: none).
	Cut int `cbor:"3,keyasint,omitempty" json:"cut,omitempty"`
	// Predicted and Measured are the training loop's rate the decision
	// expected and the one measured since (elements per second).
	Predicted float64 `cbor:"4,keyasint,omitempty" json:"predicted,omitempty"`
	Measured  float64 `cbor:"5,keyasint,omitempty" json:"measured,omitempty"`
	// Local and Remote count the elements each side prepared.
	Local  int64 `cbor:"6,keyasint,omitempty" json:"local,omitempty"`
	Remote int64 `cbor:"7,keyasint,omitempty" json:"remote,omitempty"`
	// Stall is the training loop's stall fraction over its recent batches.
	Stall float64 `cbor:"8,keyasint,omitempty" json:"stall,omitempty"`
	// Reason says why (the decision's reason, or a fallback's).
	Reason string `cbor:"9,keyasint,omitempty" json:"reason,omitempty"`
}

// LocalWorker returns the consumer whose local worker w is (a worker of
// that name runs in the consumer's process, not on a node), or false.
func (w WorkerInfo) LocalWorker() (consumer string, ok bool) { return jobspec.LocalWorkerOf(w.Name) }

// MethodProbe (ProbeRequest → ProbeResponse) is answered by the node
// asked, never forwarded: Bytes bytes of zeros, for a client to time its
// link to the mesh (offload auto's cut, before the nodes ship anything).
const MethodProbe = "link.probe"

// MaxProbeBytes bounds ProbeRequest.Bytes.
const MaxProbeBytes = 1 << 20

// ProbeRequest asks for Bytes bytes (at most MaxProbeBytes).
type ProbeRequest struct {
	Bytes int `cbor:"1,keyasint"`
}

// ProbeResponse carries them.
type ProbeResponse struct {
	Payload []byte `cbor:"1,keyasint"`
}
