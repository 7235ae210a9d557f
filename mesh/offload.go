package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/raftstate"
	"github.com/feedmesh/feedmesh/transport"
)

// The offload RPC (api.MethodOffload): a consumer assigns its local
// worker, turns the nodes' part of the job off or on, and reports its
// offload (raftstate/offload.go has the rules).

func (n *Node) registerOffloadHandler(handle func(string, func(context.Context, func(any) error) (any, error))) {
	handle(api.MethodOffload, func(ctx context.Context, decode func(any) error) (any, error) {
		var req api.OffloadRequest
		if err := decode(&req); err != nil {
			return nil, transport.Errorf(transport.ErrInvalid, "decode offload: %v", err)
		}
		return struct{}{}, n.offload(ctx, req)
	})
}

func (n *Node) offload(ctx context.Context, req api.OffloadRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodOffload, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			b := raftstate.OffloadBody{Job: req.Job, Consumer: req.Consumer, LocalWorker: req.LocalWorker, Remote: req.Remote, Retire: req.Retire}
			if r := req.Report; r != nil {
				b.Report = &raftstate.OffloadReport{Mode: r.Mode, Fraction: r.Fraction, Cut: r.Cut, Predicted: r.Predicted, Measured: r.Measured,
					Local: r.Local, Remote: r.Remote, Stall: r.Stall, Reason: truncate(r.Reason, raftstate.MaxFailureBytes)}
			}
			_, err := n.raft.Apply(ctx, raftstate.NewOffload(b))
			return err
		})
}

// offloadInfo fills a job's offload part of its wire form.
func offloadInfo(info *api.JobInfo, v raftstate.JobView) {
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
