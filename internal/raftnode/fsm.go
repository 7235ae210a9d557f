package raftnode

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/hashicorp/raft"
)

// machine adapts fsm.State to raft.FSM. raft calls Apply, Snapshot and Restore from
// its FSM goroutine; Get may be called from any goroutine, hence the lock.
type machine struct {
	beforeApply func(index uint64) // Config.BeforeApply
	// protocol is the cluster's protocol level (fsm.Protocol*, Node.SetProtocol):
	// the snapshot format this node writes.
	protocol atomic.Int32
	log      *slog.Logger // Config.Logger (nil: none)
	mu       sync.RWMutex
	state    *fsm.State
	// applied counts the commands applied, by type (the last slot: types
	// beyond the table's, and entries that did not decode).
	applied [maxCountedType + 1]atomic.Uint64
}

// maxCountedType bounds the command types machine.applied counts one by one.
const maxCountedType = 31

var _ raft.FSM = (*machine)(nil)

// applyResult is what machine.Apply returns to raft, and Node.Apply receives
// through the future's Response.
type applyResult struct {
	value any
	err   error
}

func newMachine() *machine {
	m := &machine{state: fsm.NewState()}
	m.protocol.Store(fsm.Protocol)
	return m
}

// newNodeMachine is the state machine of a node with that Config.
func newNodeMachine(cfg Config) *machine {
	m := &machine{beforeApply: cfg.BeforeApply, log: cfg.Logger, state: fsm.NewState()}
	m.protocol.Store(fsm.ProtocolLegacy) // until the node knows its cluster's (Node.SetProtocol)
	return m
}

// Apply implements raft.FSM. Only LogCommand entries reach it.
func (f *machine) Apply(l *raft.Log) any {
	if f.beforeApply != nil {
		f.beforeApply(l.Index)
	}
	c, err := fsm.DecodeCommand(l.Data)
	if err != nil {
		f.applied[maxCountedType].Add(1)
		return applyResult{err: err}
	}
	f.applied[min(int(c.Type), maxCountedType)].Add(1)
	f.mu.Lock()
	v, err := f.state.ApplyIndex(l.Index, c)
	f.mu.Unlock()
	if errors.Is(err, fsm.ErrPanicked) && f.log != nil {
		f.log.Error("a committed command panicked while it was applied: rejected, as on every replica (a bug: please report it with this line)",
			"index", l.Index, "type", c.Type, "err", err)
	}
	return applyResult{value: v, err: err}
}

// Snapshot implements raft.FSM: it copies the state so Persist can run
// concurrently with later Applies.
func (f *machine) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &machineSnapshot{state: f.state.Clone(), protocol: int(f.protocol.Load())}, nil
}

// Restore implements raft.FSM: it replaces the state with the snapshot's,
// or leaves it untouched and returns an error.
func (f *machine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	return nil
}

func (f *machine) get(key string) ([]byte, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := f.state.KV[key]
	if !ok {
		return nil, false
	}
	return append([]byte{}, v...), true
}

type machineSnapshot struct {
	state    *fsm.State
	protocol int // the format to write (fsm.State.MarshalSnapshotAt)
}

// Persist implements raft.FSMSnapshot.
func (s *machineSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := s.state.MarshalSnapshotAt(s.protocol)
	if err == nil {
		_, err = sink.Write(b)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *machineSnapshot) Release() {}

// job, jobs and dataset read under the lock and return copies.
func (f *machine) job(name string) (fsm.JobView, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.Job(name)
}

// jobCut is the offload boundary of the job of that name and id (0 when
// none, or when the job is gone or another): a cheap read, no copy.
func (f *machine) jobCut(name string, id uint64) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.state.Jobs[name]
	if !ok || (id != 0 && j.ID != id) {
		return 0
	}
	return j.Options.OffloadBoundary()
}

// idleLease is fsm.State.IdleLease on the local state.
func (f *machine) idleLease(job string, jobID uint64, worker string, incarnation uint64) (splits.Lease, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.IdleLease(job, jobID, worker, incarnation)
}

func (f *machine) jobTenant(name string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.state.Jobs[name]
	if !ok {
		return "", false
	}
	return fsm.TenantOf(j.Owner), true
}

func (f *machine) hasConsumer(job, consumer string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.state.Jobs[job]
	if !ok {
		return false
	}
	_, ok = j.Consumers[consumer]
	return ok
}

func (f *machine) token(id string) (fsm.Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.TokenRecord(id)
}

func (f *machine) tenantUsage(tenant string) fsm.Usage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.TenantUsage(tenant)
}

func (f *machine) unreadDatasets() []fsm.Dataset {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.UnreadDatasets()
}

func (f *machine) jobs() []fsm.JobView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.JobList()
}

func (f *machine) dataset(fingerprint string) (fsm.Dataset, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.Dataset(fingerprint)
}

// appliedCommands returns the commands applied so far, by type name.
func (f *machine) appliedCommands() map[string]uint64 {
	out := map[string]uint64{}
	for t := range f.applied {
		if n := f.applied[t].Load(); n > 0 {
			name := fsm.CommandType(t).String()
			if t == maxCountedType {
				name = "other"
			}
			out[name] += n
		}
	}
	return out
}

// readSnapshot reads a snapshot stream, refusing one above MaxSnapshotBytes.
func readSnapshot(r io.Reader) (*fsm.State, error) {
	data, err := io.ReadAll(io.LimitReader(r, fsm.MaxSnapshotBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return fsm.UnmarshalSnapshot(data)
}
