package fsm

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// registerDatasetBody is the body of TypeRegisterDataset. Version 2
// adds Owner (version 1 registers a dataset of the default tenant).
type registerDatasetBody struct {
	Dataset Dataset `cbor:"1,keyasint"`
	Owner   *Owner  `cbor:"2,keyasint,omitempty"`
}

// NewRegisterDataset registers d. It is idempotent: registering the same
// fingerprint with the same spec and split count again succeeds (result:
// false, nothing new); with a different spec or count it is rejected
// (ErrMismatch). Result: bool, whether the dataset is new.
func NewRegisterDataset(d Dataset) Command {
	d.Owner, d.RegisteredAt = nil, 0
	return newCommand(TypeRegisterDataset, 1, registerDatasetBody{Dataset: d})
}

// NewRegisterOwnedDataset is NewRegisterDataset (version 2) recording who
// registers it and when (the command's At), unless it is registered
// already: the first registrant owns it. A node that knows only version
// 1 refuses it (protocol level ProtocolOwners).
func NewRegisterOwnedDataset(d Dataset, owner Owner) Command {
	d.Owner, d.RegisteredAt = nil, 0
	return newCommand(TypeRegisterDataset, 2, registerDatasetBody{Dataset: d, Owner: &owner})
}

func applyRegisterDataset(s *State, c Command) (any, error) {
	var b registerDatasetBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	d := b.Dataset
	if err := checkName("dataset fingerprint", d.Fingerprint); err != nil {
		return nil, err
	}
	if c.Version < 2 && b.Owner != nil {
		return nil, fmt.Errorf("%w: RegisterDataset v%d cannot carry an owner (v2)", ErrInvalidCommand, c.Version)
	}
	if err := checkOwner(b.Owner); err != nil {
		return nil, err
	}
	if d.Owner != nil || d.RegisteredAt != 0 {
		return nil, fmt.Errorf("%w: a dataset's owner and registration time come from the command, not its body", ErrInvalidCommand)
	}
	if len(d.Spec) > maxSpecBytes {
		return nil, fmt.Errorf("%w: spec of %d bytes, limit %d", ErrInvalidCommand, len(d.Spec), maxSpecBytes)
	}
	if d.NumSplits < 0 || d.NumSplits > splits.MaxSplits {
		return nil, fmt.Errorf("%w: dataset with %d splits (want 0..%d)", ErrInvalidCommand, d.NumSplits, int64(splits.MaxSplits))
	}
	if have, ok := s.Datasets[d.Fingerprint]; ok {
		if !bytes.Equal(have.Spec, d.Spec) || have.NumSplits != d.NumSplits {
			return nil, fmt.Errorf("%w: dataset %q is registered with a different spec (%d bytes, %d splits; this one %d bytes, %d splits)",
				ErrMismatch, d.Fingerprint, len(have.Spec), have.NumSplits, len(d.Spec), d.NumSplits)
		}
		return false, nil
	}
	if len(s.Datasets) >= maxDatasets {
		return nil, fmt.Errorf("%w: %d datasets registered", ErrLimit, len(s.Datasets))
	}
	d.Spec = slices.Clone(d.Spec)
	d.ScaleWorkers, d.ScaleJob = 0, "" // (the state machine's memory, not the registrant's)
	if b.Owner != nil {
		o := *b.Owner
		d.Owner, d.RegisteredAt = &o, c.At
	}
	if d.Spec == nil {
		d.Spec = []byte{} // nil and empty must not differ after a snapshot
	}
	s.Datasets[d.Fingerprint] = d
	return true, nil
}
