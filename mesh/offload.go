package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// The offload RPC (api.MethodOffload): a consumer assigns its local
// worker, turns the nodes' part of the job off or on, and reports its
// offload (internal/fsm/offload.go has the rules).

// probe answers a link probe (api.MethodProbe) with req.Bytes of zeros.
func (n *Node) probe(_ context.Context, req api.ProbeRequest) (any, error) {
	if req.Bytes < 0 || req.Bytes > api.MaxProbeBytes {
		return nil, transport.Errorf(transport.ErrInvalid, "probe of %d bytes: want 0..%d", req.Bytes, api.MaxProbeBytes)
	}
	// A caller that does not read its answer holds it (up to
	// MaxProbeBytes, encoded) until the write gives up: a few at once,
	// the others told to come back.
	select {
	case n.probes <- struct{}{}:
	default:
		return nil, transport.Errorf(transport.ErrUnavailable, "%d link probes are being answered; try again", maxProbes)
	}
	return probeAnswer{api.ProbeResponse{Payload: probeZeros[:req.Bytes]}, n.probes}, nil
}

// maxProbes bounds the link probes a node answers at once.
const maxProbes = 4

// probeAnswer is a probe's answer, whose slot is given back once it has
// been written (transport.Written).
type probeAnswer struct {
	api.ProbeResponse
	slots chan struct{}
}

// Written implements transport.Written.
func (a probeAnswer) Written() { <-a.slots }

// probeZeros is every probe's payload (read only).
var probeZeros = make([]byte, api.MaxProbeBytes)

func (n *Node) offload(ctx context.Context, req api.OffloadRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodOffload, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			b := fsm.OffloadBody{Job: req.Job, Consumer: req.Consumer, LocalWorker: req.LocalWorker, Remote: req.Remote, Retire: req.Retire, Cut: req.Cut}
			if req.Cut != 0 {
				if err := n.checkCut(req.Job, req.Cut); err != nil {
					return err
				}
			}
			if r := req.Report; r != nil {
				b.Report = &fsm.OffloadReport{Mode: r.Mode, Fraction: r.Fraction, Cut: r.Cut, Predicted: r.Predicted, Measured: r.Measured,
					Local: r.Local, Remote: r.Remote, Stall: r.Stall, Reason: truncate(r.Reason, fsm.MaxFailureBytes)}
			}
			_, err := n.raft.Apply(ctx, fsm.NewOffload(b))
			return err
		})
}

// checkCut refuses a cut that job's pipeline does not have (the state
// machine checks the rest: fsm's checkCutMidJob).
func (n *Node) checkCut(job string, cut int) error {
	v, ok := n.raft.Job(job)
	if !ok {
		return transport.Errorf(transport.ErrNotFound, "job %q", job)
	}
	d, ok := n.raft.Dataset(v.Fingerprint)
	if !ok {
		return transport.Errorf(transport.ErrNotFound, "job %q: dataset %s", job, v.Fingerprint)
	}
	spec, err := pipeline.DecodeCanonical(d.Spec)
	if err == nil {
		err = spec.CheckCut(cut)
	}
	if err != nil {
		return transport.Errorf(transport.ErrInvalid, "job %q: cut %d: %v", job, cut, err)
	}
	return nil
}

// offloadInfo fills a job's offload part of its wire form.
func offloadInfo(info *api.JobInfo, v fsm.JobView) {
	o := v.Offload
	if o == nil {
		return
	}
	info.RemoteOff = o.RemoteOff
	for c, r := range o.Reports {
		if info.Offload == nil {
			info.Offload = map[string]api.OffloadReport{}
		}
		info.Offload[c] = api.OffloadReport{Mode: r.Mode, Fraction: r.Fraction, Cut: r.Cut, Predicted: r.Predicted, Measured: r.Measured,
			Local: r.Local, Remote: r.Remote, Stall: r.Stall, Reason: r.Reason}
	}
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
