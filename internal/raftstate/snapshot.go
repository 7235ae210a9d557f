package raftstate

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/fxamacker/cbor/v2"
)

// SnapshotFormat is the snapshot format this node writes. Restore accepts
// only formats it knows (1 and 2); a newer node's snapshot is an error, not
// a guess.
//
// Format 1: the KV table. Format 2 adds the last applied index, datasets
// and jobs.
const SnapshotFormat = 2

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

// MarshalSnapshot encodes the whole state in SnapshotFormat. Equal states
// give equal bytes.
func (s *State) MarshalSnapshot() ([]byte, error) {
	b, err := encMode.Marshal(snapshotV2{Format: SnapshotFormat, KV: s.KV, Index: s.Index, Datasets: s.Datasets, Jobs: s.Jobs})
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
			ErrSnapshotFormat, h.Format, SnapshotFormat)
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
	if len(datasets) > MaxDatasets || len(jobs) > MaxJobs {
		return fmt.Errorf("%d datasets, %d jobs: limits %d, %d", len(datasets), len(jobs), MaxDatasets, MaxJobs)
	}
	for fp, d := range datasets {
		if d.Fingerprint != fp || checkName("fingerprint", fp) != nil || len(d.Spec) > MaxSpecBytes ||
			d.NumSplits < 0 || d.NumSplits > splits.MaxSplits || d.ScaleWorkers < 0 || d.ScaleWorkers > MaxJobWorkers ||
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

// checkJob checks one decoded job against s's datasets.
func checkJob(s *State, name string, j *Job) error {
	switch {
	case j == nil:
		return errors.New("nil")
	case j.Name != name || checkName("job name", name) != nil:
		return fmt.Errorf("named %q", j.Name)
	case j.Options.Normalized() != j.Options:
		return errors.New("options not normalized")
	case len(j.Consumers) > MaxJobConsumers || len(j.Detached) > MaxJobConsumers || len(j.Workers) > MaxJobWorkers || len(j.StaticWorkers) > MaxJobWorkers:
		return errors.New("too many consumers or workers")
	case j.ID > s.Index:
		return fmt.Errorf("id %d after the last applied index %d", j.ID, s.Index)
	}
	if err := j.Options.validate(); err != nil {
		return err
	}
	d, ok := s.Datasets[j.Fingerprint]
	if !ok || d.NumSplits != j.NumSplits {
		return fmt.Errorf("dataset %q missing or with another split count", j.Fingerprint)
	}
	for id := range j.Consumers {
		if checkName("consumer", id) != nil {
			return fmt.Errorf("consumer %q", id)
		}
	}
	for id := range j.Detached {
		if checkName("detached consumer", id) != nil {
			return fmt.Errorf("detached consumer %q", id)
		}
	}
	for id, m := range j.ConsumerMetrics {
		if _, ok := j.Consumers[id]; !ok {
			return fmt.Errorf("metric of consumer %q, which is not attached", id)
		}
		if err := m.Validate(); err != nil {
			return err
		}
	}
	for w := range j.Workers {
		if checkName("worker", w) != nil {
			return fmt.Errorf("worker %q", w)
		}
	}
	isStatic := j.Options.Sharding == splits.Static
	if isStatic != (len(j.StaticWorkers) > 0) {
		return errors.New("static workers do not match the sharding")
	}
	if isStatic {
		if ws, err := staticWorkers(j.StaticWorkers, j.Options.MaxWorkers); err != nil || !slices.Equal(ws, j.StaticWorkers) {
			return errors.New("static workers not sorted, unique and within max_workers")
		}
	}
	if j.Options.Coordinated != (j.Rounds != nil) {
		return errors.New("round state does not match coordinated")
	}
	if j.Rounds != nil {
		if err := j.Rounds.validate(j); err != nil {
			return fmt.Errorf("rounds: %w", err)
		}
	}
	isDynamic := j.Options.Sharding == splits.Dynamic
	if isDynamic != (j.Dynamic != nil) {
		return errors.New("dynamic state does not match the sharding")
	}
	if isDynamic {
		epochs := max(j.Options.Epochs, 0)
		if j.Dynamic.NumSplits != j.NumSplits || j.Dynamic.Epochs != epochs {
			return errors.New("dynamic state of another size")
		}
		if err := j.Dynamic.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// readSnapshot reads a snapshot stream, refusing one above MaxSnapshotBytes.
func readSnapshot(r io.Reader) (*State, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSnapshotBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return UnmarshalSnapshot(data)
}
