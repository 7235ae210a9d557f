package fsm

import (
	"errors"
	"fmt"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/fxamacker/cbor/v2"
)

// snapshotFormat is the snapshot format this node writes. Restore accepts
// only formats it knows (1 to 3); a newer node's snapshot is an error, not
// a guess.
//
// Format 1: the KV table. Format 2 adds the last applied index, datasets
// and jobs. Format 3 stores a job's options as CreateJob v6 carries them
// (jobspec.Job, Job.CountLoss beside them) instead of the legacy
// JobOptions; format 2's are converted once, on restore.
const snapshotFormat = 3

// MaxSnapshotBytes bounds a snapshot this node will read. The state is
// metadata (never batches), so a snapshot near this size means something is
// wrong.
const MaxSnapshotBytes = 1 << 30

// snapshotV1 is format 1 on disk: the whole state, CBOR, deterministic.
type snapshotV1 struct {
	Format uint16            `cbor:"1,keyasint"`
	KV     map[string][]byte `cbor:"2,keyasint"`
}

// snapshotV3 is format 3: format 2's fields keep their keys; its jobs
// hold their options as a Job does now.
type snapshotV3 struct {
	Format   uint16             `cbor:"1,keyasint"`
	KV       map[string][]byte  `cbor:"2,keyasint"`
	Index    uint64             `cbor:"3,keyasint"`
	Datasets map[string]Dataset `cbor:"4,keyasint"`
	Jobs     map[string]*Job    `cbor:"5,keyasint"`
	// Tokens (protocol level ProtocolOwners) are the access tokens.
	Tokens map[string]Token `cbor:"6,keyasint,omitempty"`
}

// snapshotV2 is format 2: format 1's fields keep their keys, and its jobs
// hold their options in the legacy form.
type snapshotV2 struct {
	Format   uint16             `cbor:"1,keyasint"`
	KV       map[string][]byte  `cbor:"2,keyasint"`
	Index    uint64             `cbor:"3,keyasint"`
	Datasets map[string]Dataset `cbor:"4,keyasint"`
	Jobs     map[string]*jobV2  `cbor:"5,keyasint"`
}

// jobV2 is a job of format 2: a Job whose options (key 5) are the legacy
// JobOptions, count_loss among them.
type jobV2 struct {
	Job
	Options JobOptions `cbor:"5,keyasint"`
}

// job converts a format 2 job, checked as format 2 checked it (its
// options normalized and valid), to a Job.
func (v *jobV2) job() (*Job, error) {
	if v == nil {
		return nil, nil // checkJob says so
	}
	switch {
	case v.Options.Normalized() != v.Options:
		return nil, errors.New("options not normalized")
	case v.Job.CountLoss:
		return nil, errors.New("count_loss outside the options (a format 3 key)")
	}
	if err := v.Options.validate(); err != nil {
		return nil, err
	}
	o, err := v.Options.stored()
	if err != nil {
		return nil, err
	}
	j := v.Job
	j.Options, j.CountLoss = o, v.Options.CountLoss
	return &j, nil
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
	b, err := encMode.Marshal(snapshotV3{Format: snapshotFormat, KV: s.KV, Index: s.Index, Datasets: s.Datasets, Jobs: s.Jobs, Tokens: s.Tokens})
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return b, nil
}

// UnmarshalSnapshot decodes a snapshot of format 1, 2 or 3 into a new
// State, checking every invariant the commands rely on. It never panics.
func UnmarshalSnapshot(data []byte) (*State, error) {
	if len(data) > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotFormat, len(data), MaxSnapshotBytes)
	}
	var h snapshotHeader
	if err := snapHeaderDecMode.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrSnapshotFormat, err)
	}
	var v snapshotV3
	switch h.Format {
	case 1:
		var v1 snapshotV1
		if err := snapDecMode.Unmarshal(data, &v1); err != nil {
			return nil, fmt.Errorf("%w: format 1: %v", ErrSnapshotFormat, err)
		}
		v.KV = v1.KV
	case 2:
		var v2 snapshotV2
		if err := snapDecMode.Unmarshal(data, &v2); err != nil {
			return nil, fmt.Errorf("%w: format 2: %v", ErrSnapshotFormat, err)
		}
		v.KV, v.Index, v.Datasets = v2.KV, v2.Index, v2.Datasets
		if len(v2.Jobs) > maxJobs {
			return nil, fmt.Errorf("%w: format 2: %d jobs, limit %d", ErrSnapshotFormat, len(v2.Jobs), maxJobs)
		}
		v.Jobs = make(map[string]*Job, len(v2.Jobs))
		for name, j := range v2.Jobs {
			var err error
			if v.Jobs[name], err = j.job(); err != nil {
				return nil, fmt.Errorf("%w: format 2: job %q: %v", ErrSnapshotFormat, name, err)
			}
		}
	case 3:
		if err := snapDecMode.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%w: format 3: %v", ErrSnapshotFormat, err)
		}
	default:
		return nil, fmt.Errorf("%w: format %d, this node reads formats 1 to %d (was it written by a newer feedmesh?)",
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
	if len(v.Tokens) > maxTokens {
		return nil, fmt.Errorf("%w: %d tokens, limit %d", ErrSnapshotFormat, len(v.Tokens), maxTokens)
	}
	for id, t := range v.Tokens {
		if err := checkToken(id, t); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSnapshotFormat, err)
		}
		if s.Tokens == nil {
			s.Tokens = map[string]Token{}
		}
		s.Tokens[id] = t
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
