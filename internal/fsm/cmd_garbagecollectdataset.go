package fsm

import (
	"fmt"
	"time"
)

// garbageCollectDatasetBody is the body of TypeGarbageCollectDataset.
type garbageCollectDatasetBody struct {
	Fingerprint string `cbor:"1,keyasint"`
	// After is how long a dataset is spared after its registration
	// (Dataset.RegisteredAt), measured with the command's At.
	After time.Duration `cbor:"2,keyasint"`
}

// NewGarbageCollectDataset removes dataset fingerprint, which no job (nor
// share group) reads, and which was registered at least after ago (a
// dataset of an older entry, without a registration time, at any time):
// the grace lets the job a client registers it for be created, and a
// repeated autoscaling job find where the last one converged
// (Dataset.ScaleWorkers). It is rejected with ErrJobInUse while a job
// reads it or within the grace. A missing dataset is not an error.
// Result: bool, whether the dataset existed. A node of protocol level
// below ProtocolOwners refuses it (an unknown command type).
func NewGarbageCollectDataset(fingerprint string, after time.Duration) Command {
	return newCommand(TypeGarbageCollectDataset, 1, garbageCollectDatasetBody{Fingerprint: fingerprint, After: after})
}

func applyGarbageCollectDataset(s *State, c Command) (any, error) {
	var b garbageCollectDatasetBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkName("dataset fingerprint", b.Fingerprint); err != nil {
		return nil, err
	}
	if b.After < 0 {
		return nil, fmt.Errorf("%w: dataset grace %v: must not be negative", ErrInvalidCommand, b.After)
	}
	d, ok := s.Datasets[b.Fingerprint]
	if !ok {
		return false, nil
	}
	reader := "" // the least name of a job that reads it: the same error on every replica
	for name, j := range s.Jobs {
		if j.Fingerprint == b.Fingerprint && (reader == "" || name < reader) {
			reader = name
		}
	}
	if reader != "" {
		return nil, fmt.Errorf("%w: dataset %q is read by job %q", ErrJobInUse, b.Fingerprint, reader)
	}
	if d.RegisteredAt != 0 && c.At < addSat(d.RegisteredAt, b.After) {
		return nil, fmt.Errorf("%w: dataset %q was registered %v ago, within its grace of %v", ErrJobInUse, b.Fingerprint, timeDiff(c.At, d.RegisteredAt), b.After)
	}
	delete(s.Datasets, b.Fingerprint)
	return true, nil
}

// UnreadDatasets lists the datasets no job (nor share group) reads, in
// no particular order: what the leader may garbage-collect.
func (s *State) UnreadDatasets() []Dataset {
	read := make(map[string]bool, len(s.Jobs))
	for _, j := range s.Jobs {
		read[j.Fingerprint] = true
	}
	var out []Dataset
	for fp, d := range s.Datasets {
		if !read[fp] {
			d.Spec = nil
			out = append(out, d)
		}
	}
	return out
}
