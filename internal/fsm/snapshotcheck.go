package fsm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// checkJob checks one decoded job against s's datasets.
func checkJob(s *State, name string, j *Job) error {
	switch {
	case j == nil:
		return errors.New("nil")
	case j.Name != name || checkName("job name", name) != nil:
		return fmt.Errorf("named %q", j.Name)
	case j.Options.IsZero():
		return errors.New("no options")
	case len(j.Consumers) > maxJobConsumers || len(j.Detached) > maxJobConsumers || len(j.Workers) > maxJobWorkers || len(j.StaticWorkers) > maxJobWorkers:
		return errors.New("too many consumers or workers")
	case j.ID > s.Index:
		return fmt.Errorf("id %d after the last applied index %d", j.ID, s.Index)
	}
	if err := checkStored(j.Options, j.CountLoss); err != nil {
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
	isStatic := j.Options.Sharding() == jobspec.Static
	if isStatic != (len(j.StaticWorkers) > 0) {
		return errors.New("static workers do not match the sharding")
	}
	if isStatic {
		if ws, err := staticWorkers(j.StaticWorkers, j.Options.MaxWorkers()); err != nil || !slices.Equal(ws, j.StaticWorkers) {
			return errors.New("static workers not sorted, unique and within max_workers")
		}
	}
	if j.Options.Coordinated() != (j.Rounds != nil) {
		return errors.New("round state does not match coordinated")
	}
	if j.Rounds != nil {
		if err := j.Rounds.validate(j); err != nil {
			return fmt.Errorf("rounds: %w", err)
		}
	}
	isDynamic := j.Options.Sharding() == jobspec.Dynamic
	if isDynamic != (j.Dynamic != nil) {
		return errors.New("dynamic state does not match the sharding")
	}
	if isDynamic {
		epochs := max(j.Options.Epochs(), 0)
		if j.Dynamic.NumSplits != j.NumSplits || j.Dynamic.Epochs != epochs {
			return errors.New("dynamic state of another size")
		}
		if err := j.Dynamic.Validate(); err != nil {
			return err
		}
	}
	return nil
}
