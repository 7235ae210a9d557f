package raftnode

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/hashicorp/raft"
)

// Configuration returns the latest configuration (possibly not yet
// committed), sorted by ID.
func (n *Node) Configuration() ([]plan.ConfigServer, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	out := make([]plan.ConfigServer, 0, len(f.Configuration().Servers))
	for _, s := range f.Configuration().Servers {
		out = append(out, plan.ConfigServer{ID: string(s.ID), Addr: string(s.Address), Suffrage: suffrage(s.Suffrage)})
	}
	slices.SortFunc(out, func(a, b plan.ConfigServer) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return plan.SuffrageVoter
	case raft.Nonvoter:
		return plan.SuffrageNonvoter
	default:
		return plan.SuffrageStaging
	}
}

// AddVoter adds s as a voter (or promotes it), on the leader only. Raft
// first catches it up, then commits the new configuration.
func (n *Node) AddVoter(ctx context.Context, s plan.Server) error {
	if err := n.precheck(); err != nil {
		return err
	}
	if s.ID == "" || s.Addr == "" {
		return fmt.Errorf("add voter %+v: id and address are required", s)
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("add voter %s: %w", s.ID, err)
	}
	f := n.raft.AddVoter(raft.ServerID(s.ID), raft.ServerAddress(s.Addr), 0, timeout)
	if err := n.wait(ctx, f); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", s.ID, s.Addr, n.mapErr(err))
	}
	return nil
}

// AddNonvoter adds s as a nonvoter, on the leader only: it receives the
// log and the configuration, and so the leader's heartbeats, but does not
// vote. Adding a server that is already a voter leaves it a voter.
func (n *Node) AddNonvoter(ctx context.Context, s plan.Server) error {
	if err := n.precheck(); err != nil {
		return err
	}
	if s.ID == "" || s.Addr == "" {
		return fmt.Errorf("add nonvoter %+v: id and address are required", s)
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("add nonvoter %s: %w", s.ID, err)
	}
	f := n.raft.AddNonvoter(raft.ServerID(s.ID), raft.ServerAddress(s.Addr), 0, timeout)
	if err := n.wait(ctx, f); err != nil {
		return fmt.Errorf("add nonvoter %s at %s: %w", s.ID, s.Addr, n.mapErr(err))
	}
	return nil
}

// RemoveServer removes id from the configuration, on the leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if err := n.precheck(); err != nil {
		return err
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	if err := n.wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, timeout)); err != nil {
		return fmt.Errorf("remove server %s: %w", id, n.mapErr(err))
	}
	return nil
}
