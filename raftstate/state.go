package raftstate

import (
	"fmt"
)

// State is the replicated state itself: the pure core of the FSM, with no
// locks, goroutines or clocks. Node wraps it for hashicorp/raft; tests drive
// it directly. Later layers add datasets, jobs and splits as fields here,
// commands in commandTable, and fields in the snapshot format.
type State struct {
	// KV is the key/value table. Values are never nil.
	KV map[string][]byte
}

// NewState returns the empty state every replica starts from.
func NewState() *State {
	return &State{KV: make(map[string][]byte)}
}

// Apply applies one decoded command. An unknown type or version, or a body
// the handler refuses, is an error and leaves the state unchanged.
func (s *State) Apply(c Command) (any, error) {
	h, ok := commandTable[c.Type]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, uint16(c.Type))
	}
	if c.Version < h.minVersion || c.Version > h.maxVersion {
		return nil, fmt.Errorf("%w: %s v%d (this node knows v%d..v%d)",
			ErrUnknownVersion, h.name, c.Version, h.minVersion, h.maxVersion)
	}
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
	c := &State{KV: make(map[string][]byte, len(s.KV))}
	for k, v := range s.KV {
		// Values are replaced, never mutated in place, so sharing the slices
		// would be safe; copying keeps Clone honest if that ever changes.
		c.KV[k] = append([]byte{}, v...)
	}
	return c
}
