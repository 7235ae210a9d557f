package raftnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrNoState: the data dir holds no Raft state to recover (a node that was
// never a voter, or a wrong path).
var ErrNoState = errors.New("raftnode: no Raft state in the data dir")

// RecoverReport says what Recover did to one data dir.
type RecoverReport struct {
	// DataDir is the Raft data dir that was rewritten.
	DataDir string
	// Before is the configuration the data dir held; After the one it
	// holds now (the voters given to Recover), both sorted by ID.
	Before, After []plan.ConfigServer
	// LastIndex is the last log index the data dir held: every entry up to
	// it is now in the new snapshot, taken as committed.
	LastIndex uint64
}

// Recover forces the Raft configuration stored in cfg.DataDir to voters,
// for a cluster that lost its quorum for good (Consul's peers.json): run it
// on every surviving voter's stopped data dir with the same voters (the
// survivors); started again, they elect a leader among themselves. It uses
// hashicorp/raft's RecoverCluster, which replays the snapshot and the whole
// log into a scratch FSM, writes a snapshot holding the new configuration,
// and truncates the log. Every entry in this data dir's log is then taken
// as committed, including entries that were never committed; entries that
// only the lost voters had are gone.
//
// voters name servers by ID; an empty Addr is looked up in the data dir's
// current configuration, which must hold it. cfg needs ID and DataDir
// (the rest as from DefaultConfig). Errors: ErrDataDirInUse while a node
// runs on the data dir, ErrNoState when it holds no Raft state.
func Recover(cfg Config, voters []plan.Server) (RecoverReport, error) {
	rep := RecoverReport{DataDir: cfg.DataDir}
	if cfg.ID == "" || cfg.DataDir == "" {
		return rep, errors.New("recover: the node's ID and Raft data dir are required")
	}
	if len(voters) == 0 {
		return rep, errors.New("recover: no voters given")
	}
	log := newHclog(cfg.Logger)
	st, err := openExisting(cfg, log)
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	defer st.log.Close()
	if rep.LastIndex, err = st.log.LastIndex(); err != nil {
		return rep, fmt.Errorf("recover %s: last log index: %w", cfg.DataDir, err)
	}
	// The transport only encodes peer addresses into the snapshot's
	// metadata; nothing is sent.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.Addr))
	defer trans.Close()

	before, err := raft.GetConfiguration(raftConfig(cfg, log), newMachine(), st.log, st.log, st.snaps, trans)
	if err != nil {
		return rep, fmt.Errorf("recover %s: read the current configuration: %w", cfg.DataDir, err)
	}
	rep.Before = configServers(before)
	var next raft.Configuration
	for _, v := range voters {
		addr := v.Addr
		if addr == "" {
			i := slices.IndexFunc(before.Servers, func(s raft.Server) bool { return string(s.ID) == v.ID })
			if i < 0 {
				return rep, fmt.Errorf("recover %s: %s is not in its Raft configuration %v: name servers it knows", cfg.DataDir, v.ID, rep.Before)
			}
			addr = string(before.Servers[i].Address)
		}
		next.Servers = append(next.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.ID), Address: raft.ServerAddress(addr)})
	}
	slices.SortFunc(next.Servers, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	if !slices.ContainsFunc(next.Servers, func(s raft.Server) bool { return string(s.ID) == cfg.ID }) {
		return rep, fmt.Errorf("recover %s: this node, %s, is not among the voters given", cfg.DataDir, cfg.ID)
	}
	if err := raft.RecoverCluster(raftConfig(cfg, log), newMachine(), st.log, st.log, st.snaps, trans, next); err != nil {
		return rep, fmt.Errorf("recover %s: %w", cfg.DataDir, err)
	}
	rep.After = configServers(next)
	return rep, nil
}

// CheckRecoverable reports whether Recover can run on cfg.DataDir: it holds
// Raft state (else ErrNoState) and no node runs on it (else
// ErrDataDirInUse). It changes nothing.
func CheckRecoverable(cfg Config) error {
	st, err := openExisting(cfg, newHclog(cfg.Logger))
	if err != nil {
		return err
	}
	return st.log.Close()
}

// openExisting opens the stores of a data dir that must already hold Raft
// state, creating nothing when it does not.
func openExisting(cfg Config, log hclog.Logger) (stores, error) {
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft.db")); errors.Is(err, fs.ErrNotExist) {
		return stores{}, fmt.Errorf("%s: %w (no raft.db)", cfg.DataDir, ErrNoState)
	} else if err != nil {
		return stores{}, err
	}
	st, err := openStores(cfg, log)
	if err != nil {
		return stores{}, err
	}
	if !st.hasState {
		st.log.Close()
		return stores{}, fmt.Errorf("%s: %w", cfg.DataDir, ErrNoState)
	}
	return st, nil
}

func configServers(c raft.Configuration) []plan.ConfigServer {
	out := make([]plan.ConfigServer, 0, len(c.Servers))
	for _, s := range c.Servers {
		out = append(out, plan.ConfigServer{ID: string(s.ID), Addr: string(s.Address), Suffrage: suffrage(s.Suffrage)})
	}
	slices.SortFunc(out, func(a, b plan.ConfigServer) int { return strings.Compare(a.ID, b.ID) })
	return out
}
