package mesh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/transport"
)

// Status reports this node's view of the cluster.
func (n *Node) Status() api.Status {
	rs := n.raft.Status()
	if rs.Leader == "" && rs.Role == plan.RoleNone {
		// Outside the Raft configuration (a member beyond the voters, or
		// one removed while it was down that has learned so) Raft names no
		// leader: the leader is the one gossip advertises, where this node
		// forwards (leaderAddr).
		rs.Leader, rs.LeaderAddr = n.members.newestLeaderMember(n.name)
	}
	ms := n.Members()
	voters := make([]api.Voter, len(rs.Voters))
	for i, v := range rs.Voters {
		voters[i] = api.Voter{ID: v.ID, Addr: v.Addr}
	}
	alive, workers := 0, 0
	for _, m := range ms {
		if m.Status == api.StatusAlive || m.Status == api.StatusSuspect {
			alive++
			if m.Worker {
				workers++
			}
		}
	}
	return api.Status{
		Name: n.name, Addr: n.addr, GossipAddr: n.GossipAddr(), Version: Version,
		Role: rs.Role, State: rs.State, Leader: rs.Leader, LeaderAddr: rs.LeaderAddr,
		Term: rs.Term, CommitIndex: rs.CommitIndex, AppliedIndex: rs.AppliedIndex,
		LastLogIndex: rs.LastLogIndex, Voters: voters, Members: len(ms), AliveMembers: alive,
		ShareWindowBytes: n.cfg.Worker.ShareWindowBytes,
		NodesWanted:      api.NodesWanted(n.LocalJobs()), WorkerNodes: workers, Protocol: n.clusterProtocol(),
	}
}

// Put writes key=value through Raft from any node: a non-leader forwards
// to the leader. Without quorum it fails with transport.ErrNoQuorum when
// ctx (or RequestTimeout) runs out.
func (n *Node) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	resp, err := n.put(ctx, api.PutRequest{Key: key, Value: value})
	return resp.Index, err
}

// Get reads key; see api.GetRequest for consistency.
func (n *Node) Get(ctx context.Context, key string, stale bool) ([]byte, bool, error) {
	resp, err := n.get(ctx, api.GetRequest{Key: key, Stale: stale})
	return resp.Value, resp.Found, err
}

func (n *Node) put(ctx context.Context, req api.PutRequest) (api.PutResponse, error) {
	if req.Key == "" {
		return api.PutResponse{}, transport.Errorf(transport.ErrInvalid, "key must not be empty")
	}
	var resp api.PutResponse
	err := n.onLeader(ctx, req.Forwarded, api.MethodPut, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, &resp,
		func(ctx context.Context) error {
			cmd := fsm.NewPutKV(req.Key, req.Value)
			if req.IfAbsent {
				cmd = fsm.NewPutKVIfAbsent(req.Key, req.Value)
			}
			res, err := n.raft.Apply(ctx, cmd)
			resp.Index = res.Index
			resp.Value, _ = res.Value.([]byte)
			return err
		})
	return resp, err
}

func (n *Node) get(ctx context.Context, req api.GetRequest) (api.GetResponse, error) {
	if req.Stale {
		v, ok := n.raft.Get(req.Key)
		return api.GetResponse{Value: v, Found: ok}, nil
	}
	var resp api.GetResponse
	err := n.onLeader(ctx, req.Forwarded, api.MethodGet, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, &resp,
		func(ctx context.Context) error {
			if err := n.raft.Barrier(ctx); err != nil {
				return err
			}
			resp.Value, resp.Found = n.raft.Get(req.Key)
			return nil
		})
	return resp, err
}

// onLeader runs local on this node if it leads, or forwards the request to
// the leader, retrying across leader changes until ctx ends. A request that
// was itself forwarded is not forwarded again: the sender retries instead,
// so a stale leader hint can never make requests circle.
func (n *Node) onLeader(ctx context.Context, forwarded bool, method string, mkReq func(forwarded bool) any, resp any, local func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.RequestTimeout)
		defer cancel()
	}
	start := time.Now()
	var lastErr error
	for attempt := 0; ; attempt++ {
		if n.raft.IsLeader() {
			req := mkReq(false)
			err := n.checkRequest(ctx, method, req)
			if err == nil {
				err = local(ctx)
			}
			n.audit(ctx, method, req, err)
			if err == nil {
				return nil
			}
			if !retriable(err) {
				return mapRaftErr(err)
			}
			lastErr = err
		} else if forwarded {
			return transport.Errorf(transport.ErrNoLeader, "%s is not the leader", n.name)
		} else if addr := n.leaderAddr(); addr != "" && addr != n.addr {
			fr := mkReq(true)
			if f, ok := fr.(api.Forwardable); ok {
				p := principal(ctx)
				fr = f.WithCaller(&p)
			}
			err := n.forward(ctx, addr, method, fr, resp)
			if err == nil {
				return nil
			}
			if !retriable(err) {
				return err
			}
			lastErr = err
		}
		backoff := time.Duration(min(attempt+1, 10)) * 10 * time.Millisecond
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			msg := fmt.Sprintf("no leader accepted the request within %s: the cluster has no quorum reachable from %s", time.Since(start).Round(time.Millisecond), n.name)
			if lastErr != nil {
				msg += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			return transport.Errorf(transport.ErrNoQuorum, "%s", msg)
		case <-t.C:
		}
	}
}

// leaderWatchInterval is how often a forwarded request checks that the
// leader it was sent to is still the one this node knows.
const leaderWatchInterval = 10 * time.Millisecond

// forward makes one attempt of a request at the leader at addr, for at most
// ForwardAttemptTimeout. The attempt is given up, retriably, as soon as
// this node learns of another leader or of none: a leader that died (or
// was cut off) answers nothing, and waiting out the attempt's timeout on
// it would add up to ForwardAttemptTimeout (2 s by default) to every
// request in flight at a failover, a DYNAMIC worker's lease among them.
// Giving up is safe: requests that change state carry what makes their
// retry idempotent (a lease its request id).
func (n *Node) forward(ctx context.Context, addr, method string, req, resp any) error {
	actx, cancel := context.WithTimeout(ctx, n.cfg.ForwardAttemptTimeout)
	defer cancel()
	moved := make(chan string, 1)
	go func() {
		t := time.NewTicker(leaderWatchInterval)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
				if now := n.leaderAddr(); now != addr {
					moved <- now
					cancel()
					return
				}
			}
		}
	}()
	err := transport.Call(actx, n.tr, n.codec, addr, method, req, resp)
	cancel() // ends the watch
	if err != nil {
		select {
		case now := <-moved:
			if now == "" {
				now = "none known yet"
			}
			return fmt.Errorf("leader changed from %s (now %s) before it answered %s: %w", addr, now, method, err)
		default:
		}
	}
	return err
}

// retriable reports whether err may go away with another attempt, possibly
// at another leader.
func retriable(err error) bool {
	switch {
	case errors.Is(err, transport.ErrPermissionDenied), errors.Is(err, api.ErrQuota):
		return false
	case errorsIsRejected(err), errors.Is(err, api.ErrNotAssigned), errors.Is(err, api.ErrHandBackRefused), errors.Is(err, api.ErrDismissed):
		return false
	case errors.Is(err, transport.ErrInvalid), errors.Is(err, transport.ErrNotFound),
		errors.Is(err, transport.ErrUnknownMethod), errors.Is(err, transport.ErrPermissionDenied):
		return false
	}
	return true
}

// mapRaftErr maps an error of a Raft apply to the error the caller is
// answered. A command the state machine refused is answered with the
// state machine's reason alone: the apply's wrapping ("apply CreateJob at
// index 422: raftnode: command rejected by the state machine: ...") is
// this node's business, not the caller's.
func mapRaftErr(err error) error {
	switch {
	case errors.Is(err, fsm.ErrPermission):
		return transport.Errorf(transport.ErrPermissionDenied, "%v", err)
	case errors.Is(err, fsm.ErrQuota):
		// Every replica's apply refused it: the leader's own check (which
		// names the same bound) let it through, racing another request
		// or another leader's.
		return transport.Errorf(api.ErrQuota, "%v", rejectedReason(err))
	case errors.Is(err, fsm.ErrUnknownJob):
		return transport.Errorf(transport.ErrNotFound, "%v", rejectedReason(err))
	case errors.Is(err, fsm.ErrNotAssigned):
		return transport.Errorf(api.ErrNotAssigned, "%v", rejectedReason(err))
	case errors.Is(err, fsm.ErrDismissed):
		return transport.Errorf(api.ErrDismissed, "%v", rejectedReason(err))
	case errors.Is(err, splits.ErrHandBackRefused):
		return transport.Errorf(api.ErrHandBackRefused, "%v", rejectedReason(err))
	case errorsIsRejected(err):
		return transport.Errorf(transport.ErrInvalid, "%v", rejectedReason(err))
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raftnode.ErrNotLeader):
		return transport.Errorf(transport.ErrNoLeader, "%v", err)
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, context.DeadlineExceeded):
		return transport.Errorf(transport.ErrNoQuorum, "not committed in time: %v", err)
	}
	return err
}

// rejectedReason is the state machine's own error inside err, a command
// raftnode.Node.Apply reports as rejected (it wraps both
// raftnode.ErrRejected and the state machine's error); err itself
// otherwise.
func rejectedReason(err error) error {
	for e := err; e != nil; {
		if m, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range m.Unwrap() {
				if inner != raftnode.ErrRejected {
					return inner
				}
			}
			return err
		}
		e = errors.Unwrap(e)
	}
	return err
}

// leaderAddr is the leader's QUIC address: from Raft when this node takes
// part in it, else from gossip, where the leader advertises its role
// (non-voters hold no Raft state and learn the leader only that way; after
// a failover, two members may advertise it for a while: newestLeader).
func (n *Node) leaderAddr() string {
	if _, addr := n.raft.Leader(); addr != "" {
		return addr
	}
	if n.inRaftConfig() {
		// Between a leader's death and the next election, gossip still
		// advertises the dead leader for seconds (until it is declared
		// dead); Raft tells this node the new one as soon as it is
		// elected.
		return ""
	}
	return n.members.newestLeader(n.name)
}

// inRaftConfig reports whether this node is in the latest Raft
// configuration (a voter or nonvoter), so Raft, not gossip, tells it the
// leader.
func (n *Node) inRaftConfig() bool {
	cfg, err := n.raft.Configuration()
	if err != nil {
		return false
	}
	for _, s := range cfg {
		if s.ID == n.name {
			return true
		}
	}
	return false
}
