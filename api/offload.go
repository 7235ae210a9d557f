package api

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// Offload (JobOptions.Offload) says where a DYNAMIC job's pipeline runs
// for a consumer: on the mesh's nodes, in the consumer's own process (a
// local worker that leases splits beside the nodes), or both. The
// client does the work; the cluster only keeps the local worker's leases
// (MethodOffload) and, while a consumer's host prepares everything, keeps
// the nodes off the job.
const (
	// OffloadAuto profiles the pipeline and the training loop on the
	// trainer's host, then decides (FastFlow's policy, client/offload).
	OffloadAuto = "auto"
	// OffloadRemote: the nodes prepare everything (no local worker).
	OffloadRemote = "remote"
	// OffloadLocal: the local worker prepares everything; the nodes
	// take no split of the job.
	OffloadLocal = "local"
)

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

// MaxLocalFraction is ParseOffload's largest fraction other than local.
const MaxLocalFraction = 1.0

// ParseOffload parses an offload mode: auto, remote, local, or a fixed
// local fraction in [0, 1] ("0.3" or "fraction=0.3"). The empty string is
// auto. fraction is the local share a fixed mode means (remote 0, local
// 1); auto reports -1.
func ParseOffload(s string) (mode string, fraction float64, err error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "", OffloadAuto:
		return OffloadAuto, -1, nil
	case OffloadRemote:
		return OffloadRemote, 0, nil
	case OffloadLocal:
		return OffloadLocal, 1, nil
	}
	f, perr := strconv.ParseFloat(strings.TrimPrefix(v, "fraction="), 64)
	if perr != nil || !(f >= 0 && f <= 1) {
		return "", 0, fmt.Errorf("offload %q: want auto, remote, local, or a local fraction in [0, 1] such as 0.3", s)
	}
	switch f {
	case 0:
		return OffloadRemote, 0, nil
	case 1:
		return OffloadLocal, 1, nil
	}
	return FractionMode(f), f, nil
}

// FractionMode names a fixed fraction as ParseOffload reads it back.
func FractionMode(f float64) string { return "fraction=" + strconv.FormatFloat(f, 'g', 3, 64) }

// LocalWorker returns the consumer whose local worker w is (a worker of
// that name runs in the consumer's process, not on a node), or false.
func (w WorkerInfo) LocalWorker() (consumer string, ok bool) { return jobspec.LocalWorkerOf(w.Name) }

// validateOffload checks the offload fields of o (defaults applied).
func (o JobOptions) validateOffload() error {
	mode, _, err := ParseOffload(o.Offload)
	if err != nil {
		return err
	}
	if o.LocalCPUs < 0 || o.LocalCPUs > 4096 {
		return fmt.Errorf("local_cpus %v: want 0 (the spare CPUs measured) up to 4096", o.LocalCPUs)
	}
	if o.OffloadBoundary < 0 {
		return fmt.Errorf("offload_boundary %d: want 0 (no cut) or the number of ops the nodes run", o.OffloadBoundary)
	}
	if mode != OffloadAuto && mode != OffloadRemote && (o.Sharding != Dynamic || o.Share || o.Coordinated) {
		return fmt.Errorf("offload %s: a local worker needs sharding dynamic without share or coordinated reads (have sharding %s, share %v, coordinated %v); use offload remote", o.Offload, o.Sharding, o.Share, o.Coordinated)
	}
	if o.OffloadBoundary > 0 && (o.Sharding != Dynamic || o.Share || o.Coordinated) {
		return fmt.Errorf("offload_boundary: only for sharding dynamic without share or coordinated reads")
	}
	if o.OffloadBoundary > 0 && o.Delivery != ExactlyOnce {
		return fmt.Errorf("offload_boundary %d: needs delivery %s (the consumer seeds the ops after the cut from each element's provenance, which exactly-once carries)", o.OffloadBoundary, ExactlyOnce)
	}
	if o.OffloadBoundary > 0 && mode != OffloadAuto && mode != OffloadRemote {
		return fmt.Errorf("offload_boundary %d with offload %s: a cut runs the ops before it on the nodes only; a local worker beside a cut is not built (use offload remote)", o.OffloadBoundary, o.Offload)
	}
	return nil
}

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
