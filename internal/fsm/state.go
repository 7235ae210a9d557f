package fsm

import (
	"fmt"
	"slices"
)

// State is the replicated state itself: the pure core of the FSM, with no
// locks, goroutines or clocks. Node wraps it for hashicorp/raft; tests drive
// it directly. Each layer adds its fields here, its commands in
// commandTable, and its fields in the snapshot format.
type State struct {
	// KV is the key/value table. Values are never nil.
	KV map[string][]byte
	// Index is the log index of the last command applied successfully
	// (ApplyIndex; Apply counts up by one). CreateJob uses the index of its
	// own entry as the job ID.
	Index uint64
	// Datasets are the registered datasets by fingerprint.
	Datasets map[string]Dataset
	// Jobs are the jobs by name. Never nil values.
	Jobs map[string]*Job
	// Tokens are the access tokens by id (PutToken); nil until the first.
	Tokens map[string]Token

	// applying is the index of the command being applied, set only during
	// ApplyIndex.
	applying uint64
}

// NewState returns the empty state every replica starts from.
func NewState() *State {
	return &State{KV: make(map[string][]byte), Datasets: map[string]Dataset{}, Jobs: map[string]*Job{}}
}

// Apply applies one decoded command as if it were the log entry after
// Index. An unknown type or version, or a body the handler refuses, is an
// error and leaves the state unchanged.
func (s *State) Apply(c Command) (any, error) { return s.ApplyIndex(s.Index+1, c) }

// ApplyIndex applies one decoded command that sits at index in the log
// (what the FSM does). On success Index becomes index; on error the state
// is unchanged.
func (s *State) ApplyIndex(index uint64, c Command) (any, error) {
	h, ok := commandTable[c.Type]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, uint16(c.Type))
	}
	if c.Version < h.minVersion || c.Version > h.maxVersion {
		return nil, fmt.Errorf("%w: %s v%d (this node knows v%d..v%d)",
			ErrUnknownVersion, h.name, c.Version, h.minVersion, h.maxVersion)
	}
	s.applying = index
	v, err := h.applyRecovering(s, c)
	s.applying = 0
	if err != nil {
		return nil, err
	}
	s.Index = index
	return v, nil
}

// applyRecovering applies c. A panic in a handler (a bug, or an entry
// that no check foresaw) must not crash every replica, and again at every
// replay of the log: the entry is rejected instead, with the panic's value.
// Every replica applies the same entry to the same state, so all reject it
// alike, and what the handler changed before it panicked is the same on
// each.
func (h handler) applyRecovering(s *State, c Command) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%w: %s v%d: %v", ErrPanicked, h.name, c.Version, r)
		}
	}()
	return h.apply(s, c)
}

// ApplyEntry decodes a log entry and applies it.
func (s *State) ApplyEntry(data []byte) (any, error) {
	c, err := DecodeCommand(data)
	if err != nil {
		return nil, err
	}
	return s.Apply(c)
}

// Clone returns a deep copy, for snapshots taken while Apply goes on.
func (s *State) Clone() *State {
	c := &State{
		KV:       make(map[string][]byte, len(s.KV)),
		Index:    s.Index,
		Datasets: make(map[string]Dataset, len(s.Datasets)),
		Jobs:     make(map[string]*Job, len(s.Jobs)),
	}
	for k, v := range s.KV {
		// Values are replaced, never mutated in place, so sharing the slices
		// would be safe; copying keeps Clone honest if that ever changes.
		c.KV[k] = append([]byte{}, v...)
	}
	for k, d := range s.Datasets {
		d.Spec = slices.Clone(d.Spec)
		c.Datasets[k] = d
	}
	for k, j := range s.Jobs {
		c.Jobs[k] = j.Clone()
	}
	if s.Tokens != nil {
		c.Tokens = make(map[string]Token, len(s.Tokens))
		for k, t := range s.Tokens {
			t.Hash = slices.Clone(t.Hash)
			c.Tokens[k] = t
		}
	}
	return c
}
