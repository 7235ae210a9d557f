package raftnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/hashicorp/raft"
)

// Apply commits cmd through Raft and applies it to the FSM. Only the leader
// may: elsewhere it returns ErrNotLeader. If cmd.At is zero it is set to the
// current time here, before the command enters the log. ctx bounds the whole
// call; when it ends first, the command may still commit.
//
// Errors: ErrNotLeader (also wrapping raft.ErrNotLeader when leadership moved
// during the call), raft.ErrLeadershipLost (outcome unknown), ErrRejected
// (committed, FSM refused: Result.Index is set), ErrCommandTooLarge,
// ctx.Err(), ErrClosed.
func (n *Node) Apply(ctx context.Context, cmd fsm.Command) (Result, error) {
	p := n.submit(ctx, cmd)
	return n.finish(ctx, p)
}

// ApplyEach commits cmds in order, as Apply does each, but submits them
// all before waiting for any: Raft replicates and commits them together
// instead of one quorum round trip (and fsync) after another. A plan of
// n steps (one AssignTask per worker for a job over all nodes) took n
// round trips, past 30 s at 60 in-process nodes on a loaded machine. The
// results and errors are Apply's, one per command; a command rejected by
// the state machine does not stop the ones after it, which the state
// machine judges on the state as it then is.
func (n *Node) ApplyEach(ctx context.Context, cmds []fsm.Command) ([]Result, []error) {
	ps := make([]pending, len(cmds))
	for i, c := range cmds {
		ps[i] = n.submit(ctx, c)
	}
	res, errs := make([]Result, len(cmds)), make([]error, len(cmds))
	for i := range ps {
		res[i], errs[i] = n.finish(ctx, ps[i])
	}
	return res, errs
}

// pending is a command submitted to Raft (or refused before: err).
type pending struct {
	cmd   fsm.Command
	f     raft.ApplyFuture
	start time.Time
	err   error
}

func (n *Node) submit(ctx context.Context, cmd fsm.Command) pending {
	p := pending{cmd: cmd}
	if p.err = n.precheck(); p.err != nil {
		return p
	}
	if p.cmd.At == 0 {
		p.cmd.At = time.Now().UnixNano()
	}
	data, err := fsm.EncodeCommand(p.cmd)
	if err != nil {
		p.err = err
		return p
	}
	if len(data) > n.cfg.MaxCommandBytes {
		p.err = fmt.Errorf("apply %v: %w: %d bytes, MaxCommandBytes %d", cmd.Type, fsm.ErrCommandTooLarge, len(data), n.cfg.MaxCommandBytes)
		return p
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		p.err = fmt.Errorf("apply %v: %w", cmd.Type, err)
		return p
	}
	p.start = time.Now()
	p.f = n.raft.Apply(data, timeout)
	return p
}

func (n *Node) finish(ctx context.Context, p pending) (Result, error) {
	if p.err != nil {
		return Result{}, p.err
	}
	cmd, f := p.cmd, p.f
	if err := n.wait(ctx, f); err != nil {
		return Result{}, fmt.Errorf("apply %v: %w", cmd.Type, n.mapErr(err))
	}
	n.applyNanos.Add(int64(time.Since(p.start)))
	n.applied.Add(1)
	res := Result{Index: f.Index()}
	r, ok := f.Response().(applyResult)
	if !ok {
		return res, fmt.Errorf("apply %v: unexpected FSM response %T", cmd.Type, f.Response())
	}
	res.Value = r.value
	if r.err != nil {
		return res, fmt.Errorf("apply %v at index %d: %w: %w", cmd.Type, res.Index, ErrRejected, r.err)
	}
	return res, nil
}

// ApplyLatency returns how many commands Apply has committed through this
// node (as leader) since it opened, and their summed latency from the call
// to the state machine's answer (commit on a quorum, then apply).
func (n *Node) ApplyLatency() (count int64, total time.Duration) {
	return n.applied.Load(), time.Duration(n.applyNanos.Load())
}

// Barrier waits, on the leader, until every entry committed before it has
// been applied to the local FSM: a Get after it is linearizable.
func (n *Node) Barrier(ctx context.Context) error {
	if err := n.precheck(); err != nil {
		return err
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if err := n.wait(ctx, n.raft.Barrier(timeout)); err != nil {
		return fmt.Errorf("barrier: %w", n.mapErr(err))
	}
	return nil
}

func (n *Node) precheck() error {
	if n.closed() {
		return ErrClosed
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	return nil
}

// timeoutOf turns ctx's deadline into raft's enqueue timeout (0: none).
func timeoutOf(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	return d, nil
}

// wait waits for f or ctx. raft's timeout only bounds enqueueing, not the
// commit, so a ctx that can end gets a waiter goroutine; it ends when the
// future resolves, which raft guarantees by shutdown at the latest, and
// Close waits for it.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	ch := make(chan error, 1)
	n.waitMu.Lock()
	if n.waitClosed {
		n.waitMu.Unlock()
		return fmt.Errorf("%w: the node is closing", ErrClosed)
	}
	n.waiters.Add(1)
	n.waitMu.Unlock()
	go func() {
		defer n.waiters.Done()
		ch <- f.Error()
	}()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mapErr keeps raft's errors detectable and adds ours: raft.ErrNotLeader
// also matches ErrNotLeader, an enqueue timeout also matches
// context.DeadlineExceeded, and a shutdown matches ErrClosed.
func (n *Node) mapErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// SetProtocol sets the cluster's protocol level (fsm.ProtocolLegacy or
// fsm.Protocol): the least level the Raft servers speak, as the mesh
// learns it from their gossip. The node writes its snapshots in that
// level's format, so that a server of an older release can restore one
// its leader sends it. Until it is set, a node writes the legacy format.
func (n *Node) SetProtocol(level int) { n.machine.protocol.Store(int32(level)) }

// Protocol is the level SetProtocol set.
func (n *Node) Protocol() int { return int(n.machine.protocol.Load()) }
