package raftstate

import (
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"
)

// SnapshotFormat is the snapshot format this node writes. Restore accepts
// only formats it knows; a newer node's snapshot is an error, not a guess.
const SnapshotFormat = 1

// MaxSnapshotBytes bounds a snapshot this node will read. The state is
// metadata (never batches), so a snapshot near this size means something is
// wrong.
const MaxSnapshotBytes = 1 << 30

// ErrSnapshotFormat: the snapshot is malformed or of an unknown format.
var ErrSnapshotFormat = errors.New("raftstate: bad snapshot")

// snapshotV1 is format 1 on disk: the whole state, CBOR, deterministic.
type snapshotV1 struct {
	Format uint16            `cbor:"1,keyasint"`
	KV     map[string][]byte `cbor:"2,keyasint"`
}

// snapshotHeader reads just the format, whatever else the snapshot holds.
type snapshotHeader struct {
	Format uint16 `cbor:"1,keyasint"`
}

var snapHeaderDecMode, snapDecMode cbor.DecMode

func init() {
	var err error
	snapHeaderDecMode, err = cbor.DecOptions{
		MaxNestedLevels:  16,
		MaxArrayElements: 1 << 24,
		MaxMapPairs:      1 << 24,
	}.DecMode()
	if err != nil {
		panic(err) // static options
	}
	snapDecMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		MaxNestedLevels:   16,
		MaxArrayElements:  1 << 24,
		MaxMapPairs:       1 << 24,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// MarshalSnapshot encodes the whole state in SnapshotFormat. Equal states
// give equal bytes.
func (s *State) MarshalSnapshot() ([]byte, error) {
	b, err := encMode.Marshal(snapshotV1{Format: SnapshotFormat, KV: s.KV})
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return b, nil
}

// UnmarshalSnapshot decodes a snapshot into a new State. It never panics.
func UnmarshalSnapshot(data []byte) (*State, error) {
	if len(data) > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotFormat, len(data), MaxSnapshotBytes)
	}
	var h snapshotHeader
	if err := snapHeaderDecMode.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrSnapshotFormat, err)
	}
	if h.Format != SnapshotFormat {
		return nil, fmt.Errorf("%w: format %d, this node reads format %d (was it written by a newer feedmesh?)",
			ErrSnapshotFormat, h.Format, SnapshotFormat)
	}
	var v snapshotV1
	if err := snapDecMode.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%w: format %d: %v", ErrSnapshotFormat, h.Format, err)
	}
	s := NewState()
	for k, val := range v.KV {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSnapshotFormat, err)
		}
		if val == nil {
			val = []byte{}
		}
		s.KV[k] = val
	}
	return s, nil
}

// readSnapshot reads a snapshot stream, refusing one above MaxSnapshotBytes.
func readSnapshot(r io.Reader) (*State, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSnapshotBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return UnmarshalSnapshot(data)
}
