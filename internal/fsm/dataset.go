package fsm

import (
	"slices"
)

// Dataset is a registered pipeline spec.
type Dataset struct {
	// Fingerprint identifies the dataset (pipeline.Spec.Fingerprint).
	Fingerprint string `cbor:"1,keyasint" json:"fingerprint"`
	// Spec is the canonical CBOR of the pipeline spec, opaque here.
	Spec []byte `cbor:"2,keyasint" json:"-"`
	// NumSplits is how many splits the source enumerates per epoch.
	NumSplits int64 `cbor:"3,keyasint" json:"num_splits"`
	// ScaleWorkers is the worker count at which the last autoscaling job
	// of the dataset (ScaleJob) converged (one more when it wanted one the
	// mesh did not have): where the next such job starts (ScaleStart).
	// The state machine's own memory: RegisterDataset does not set it.
	ScaleWorkers int    `cbor:"4,keyasint,omitempty" json:"scale_workers,omitempty"`
	ScaleJob     string `cbor:"5,keyasint,omitempty" json:"scale_job,omitempty"`
	// Owner is who registered the dataset first (RegisterDataset v2);
	// nil for a dataset of an older entry: the default tenant's.
	Owner *Owner `cbor:"6,keyasint,omitempty" json:"owner,omitempty"`
	// RegisteredAt is when (the command's At; RegisterDataset v2):
	// garbage collection spares a dataset for a while after it
	// (NewGarbageCollectDataset). 0 for an older entry.
	RegisteredAt int64 `cbor:"7,keyasint,omitempty" json:"registered_at,omitempty"`
}

// Dataset returns a copy of the dataset with that fingerprint.
func (s *State) Dataset(fingerprint string) (Dataset, bool) {
	d, ok := s.Datasets[fingerprint]
	if !ok {
		return Dataset{}, false
	}
	d.Spec = slices.Clone(d.Spec)
	return d, true
}
