package mesh

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/pipeline"
)

// The DYNAMIC split RPCs, each answered on the leader: workers lease
// splits and report them finished (at-most-once) or produced
// (exactly-once); consumers of exactly-once jobs report what they
// received and fence dead workers (splits/exactly.go says why).

func (n *Node) lease(ctx context.Context, req api.LeaseRequest) (api.LeaseResponse, error) {
	var resp api.LeaseResponse
	err := n.onLeader(ctx, req.Forwarded, api.MethodLease, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, &resp,
		func(ctx context.Context) error {
			if l, ok := n.raft.IdleLease(req.Job, req.JobID, req.Worker, req.Incarnation); ok {
				// The job's consumer keeps the nodes off its splits
				// (offload local): the empty lease the command would
				// give, without committing one per poll.
				resp = api.LeaseResponse{Epoch: l.Epoch, Splits: l.Splits, Done: l.Done, Exclude: l.Exclude, AllProduced: l.AllProduced, Cut: l.Cut, Census: l.Census}
				return nil
			}
			cmd := fsm.NewLeaseSplitsPreferring(req.Job, req.JobID, req.Worker, req.Incarnation, req.RequestID, req.N, preferHeld(req))
			if req.RunsCensus && n.clusterProtocol() >= fsm.ProtocolLocalCensus {
				cmd = fsm.NewLeaseSplitsCensus(req.Job, req.JobID, req.Worker, req.Incarnation, req.RequestID, req.N, preferHeld(req))
			}
			res, err := n.raft.Apply(ctx, cmd)
			if err != nil {
				return err
			}
			l, ok := res.Value.(splits.Lease)
			if !ok {
				return fmt.Errorf("lease splits: unexpected result %T", res.Value)
			}
			resp = api.LeaseResponse{Epoch: l.Epoch, Splits: l.Splits, Done: l.Done, Exclude: l.Exclude, AllProduced: l.AllProduced, Cut: l.Cut, Census: l.Census}
			return nil
		})
	return resp, err
}

func (n *Node) finish(ctx context.Context, req api.FinishRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodFinish, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewFinishSplits(req.Job, req.Worker, req.Epoch, req.Splits))
			return err
		})
}

func (n *Node) produce(ctx context.Context, req api.ProduceRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodProduce, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewProduceSplitsOfJob(req.Job, req.JobID, req.Worker, req.Epoch, req.Splits))
			return err
		})
}

func (n *Node) handBack(ctx context.Context, req api.HandBackRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodHandBack, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewHandBackSplits(req.Job, req.JobID, req.Worker, req.Epoch, req.Splits))
			return err
		})
}

func (n *Node) drained(ctx context.Context, req api.DrainedRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodDrained, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewDrainTask(req.Job, req.JobID, req.Worker, req.Incarnation))
			return err
		})
}

func (n *Node) receipts(ctx context.Context, req api.ReceiptsRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodReceipts, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			rs := make([]fsm.Receipt, len(req.Receipts))
			for i, r := range req.Receipts {
				rs[i] = fsm.Receipt{Epoch: r.Epoch, Split: r.Split, Got: r.Got}
			}
			_, err := n.raft.Apply(ctx, fsm.NewReceipts(req.Job, req.Consumer, req.Seq, rs, req.Fenced))
			return err
		})
}

// countsLoss reports whether an at-most-once job counts its loss exactly
// (fsm.Job.CountLoss, splits/census.go): every DYNAMIC one
// without share or coordinated reads whose pipeline exactly-once could
// run (no take or skip: they count per worker pipeline; a census runs a
// dead worker's splits again, to count them). The others count lost
// splits only (jobspec.GuaranteeOf says the same).
func countsLoss(o jobspec.Job, spec *pipeline.Spec) bool {
	f := api.SpecFeatures(spec)
	return o.Delivery() == jobspec.AtMostOnce && o.Sharding() == jobspec.Dynamic && !o.Share() && !o.Coordinated() && !f.Take && !f.Skip
}
