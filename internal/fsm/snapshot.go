package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/fxamacker/cbor/v2"
)

// snapshotFormat is the snapshot format this node writes. Restore accepts
// only formats it knows (1 and 2); a newer node's snapshot is an error, not
// a guess.
//
// Format 1: the KV table. Format 2 adds the last applied index, datasets
// and jobs.
const snapshotFormat = 2

// MaxSnapshotBytes bounds a snapshot this node will read. The state is
// metadata (never batches), so a snapshot near this size means something is
// wrong.
const MaxSnapshotBytes = 1 << 30

// snapshotV1 is format 1 on disk: the whole state, CBOR, deterministic.
type snapshotV1 struct {
	Format uint16            `cbor:"1,keyasint"`
	KV     map[string][]byte `cbor:"2,keyasint"`
}

// snapshotV2 is format 2: format 1's fields keep their keys.
type snapshotV2 struct {
	Format   uint16             `cbor:"1,keyasint"`
	KV       map[string][]byte  `cbor:"2,keyasint"`
	Index    uint64             `cbor:"3,keyasint"`
	Datasets map[string]Dataset `cbor:"4,keyasint"`
	Jobs     map[string]*Job    `cbor:"5,keyasint"`
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

// MarshalSnapshot encodes the whole state in snapshotFormat. Equal states
// give equal bytes.
func (s *State) MarshalSnapshot() ([]byte, error) {
	b, err := encMode.Marshal(snapshotV2{Format: snapshotFormat, KV: s.KV, Index: s.Index, Datasets: s.Datasets, Jobs: s.Jobs})
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return b, nil
}

// UnmarshalSnapshot decodes a snapshot of format 1 or 2 into a new State,
// checking every invariant the commands rely on. It never panics.
func UnmarshalSnapshot(data []byte) (*State, error) {
	if len(data) > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotFormat, len(data), MaxSnapshotBytes)
	}
	var h snapshotHeader
	if err := snapHeaderDecMode.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrSnapshotFormat, err)
	}
	var v snapshotV2
	switch h.Format {
	case 1:
		var v1 snapshotV1
		if err := snapDecMode.Unmarshal(data, &v1); err != nil {
			return nil, fmt.Errorf("%w: format 1: %v", ErrSnapshotFormat, err)
		}
		v.KV = v1.KV
	case 2:
		if err := snapDecMode.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%w: format 2: %v", ErrSnapshotFormat, err)
		}
	default:
		return nil, fmt.Errorf("%w: format %d, this node reads formats 1 and %d (was it written by a newer feedmesh?)",
			ErrSnapshotFormat, h.Format, snapshotFormat)
	}
	s := NewState()
	s.Index = v.Index
	for k, val := range v.KV {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSnapshotFormat, err)
		}
		if val == nil {
			val = []byte{}
		}
		s.KV[k] = val
	}
	if err := restoreJobs(s, v.Datasets, v.Jobs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshotFormat, err)
	}
	return s, nil
}

// restoreJobs checks decoded datasets and jobs and puts them in s.
func restoreJobs(s *State, datasets map[string]Dataset, jobs map[string]*Job) error {
	if len(datasets) > maxDatasets || len(jobs) > maxJobs {
		return fmt.Errorf("%d datasets, %d jobs: limits %d, %d", len(datasets), len(jobs), maxDatasets, maxJobs)
	}
	for fp, d := range datasets {
		if d.Fingerprint != fp || checkName("fingerprint", fp) != nil || len(d.Spec) > maxSpecBytes ||
			d.NumSplits < 0 || d.NumSplits > splits.MaxSplits || d.ScaleWorkers < 0 || d.ScaleWorkers > maxJobWorkers ||
			d.ScaleJob != "" && checkName("job name", d.ScaleJob) != nil {
			return fmt.Errorf("dataset %q: invalid", fp)
		}
		if d.Spec == nil {
			d.Spec = []byte{}
		}
		s.Datasets[fp] = d
	}
	for name, j := range jobs {
		if err := checkJob(s, name, j); err != nil {
			return fmt.Errorf("job %q: %w", name, err)
		}
		if j.Consumers == nil {
			j.Consumers = map[string]int64{}
		}
		if j.Workers == nil {
			j.Workers = map[string]WorkerState{}
		}
		s.Jobs[name] = j
	}
	return nil
}
