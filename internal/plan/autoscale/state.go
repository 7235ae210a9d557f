package autoscale

import (
	"fmt"
)

// Phase is where a job is in the policy.
type Phase uint8

// The phases.
const (
	Up        Phase = iota // adding workers while they help
	Converged              // holding, revisited now and then
	Down                   // removing workers while they are not missed
)

func (p Phase) String() string {
	switch p {
	case Up:
		return "scaling up"
	case Converged:
		return "converged"
	case Down:
		return "scaling down"
	}
	return fmt.Sprintf("phase %d", uint8(p))
}

// State is one job's autoscaling state. The zero value is not
// valid: start from NewState.
type State struct {
	Phase Phase `cbor:"1,keyasint" json:"phase"`
	// Workers is the count the policy wants now.
	Workers int `cbor:"2,keyasint" json:"workers"`
	// Base is the batch time measured before the last change (0: none
	// yet): what the next metric is compared with.
	Base float64 `cbor:"3,keyasint" json:"base"`
	// ConvergedBatchTime and ConvergedQueue are the metric recorded when
	// the decision converged (ConvergedQueue < 0: not recorded yet).
	ConvergedBatchTime float64 `cbor:"4,keyasint" json:"converged_batch_time"`
	ConvergedQueue     float64 `cbor:"5,keyasint" json:"converged_queue"`
	// Pause counts the metrics still to ignore; SinceRevisit the metrics
	// since the converged decision was last revisited.
	Pause        int `cbor:"6,keyasint" json:"pause"`
	SinceRevisit int `cbor:"7,keyasint" json:"since_revisit"`
	// Reason says why the last decision was taken, for `feedmesh jobs`.
	Reason string `cbor:"8,keyasint" json:"reason"`
	// StepBatches (in a job) is the reporting consumer's batch count at
	// the last step; Changes counts the changes of Workers.
	StepBatches int64 `cbor:"9,keyasint,omitempty" json:"step_batches,omitempty"`
	Changes     int64 `cbor:"10,keyasint,omitempty" json:"changes,omitempty"`
	// Speaker is the consumer whose metrics the job follows.
	Speaker string `cbor:"11,keyasint,omitempty" json:"speaker,omitempty"`
	// Allocated: the leader allocates the job's nodes (the state
	// machine's AllocateJob) and can take workers back, so the policy
	// scales down and waits for a worker it asked for before measuring
	// it. Jobs of a log from before AllocateJob never set it and replay
	// as they did.
	Allocated bool `cbor:"12,keyasint,omitempty" json:"allocated,omitempty"`
	// Allotted is how many nodes the last allocation gave the job, and
	// Allocation why (its own nodes, or a fair share of how many).
	Allotted   int    `cbor:"13,keyasint,omitempty" json:"share,omitempty"`
	Allocation string `cbor:"14,keyasint,omitempty" json:"allocation,omitempty"`
	// WantsMore: the policy converged because the allocation could not
	// give the worker it asked for (no free node): the job would take
	// one more (fsm's Job.WantedWorkers counts it) and tries again at a
	// revisit.
	WantsMore bool `cbor:"15,keyasint,omitempty" json:"wants_more,omitempty"`
	// BaseQueue (scaling down) is the result queue measured before the
	// last worker was removed: a queue that then drains shows the workers
	// left fall behind the model, whatever the batch time says (the
	// consumer was fed from its queue). When the try fails, it becomes the
	// converged queue: a queue that was not enough to go without a worker
	// must grow well past it before the next try (else a plateau's queue,
	// filling slowly towards its bound, would set off a try at every
	// revisit).
	BaseQueue float64 `cbor:"16,keyasint,omitempty" json:"base_queue,omitempty"`
}

// NewState is a new job's state: one worker, scaling up.
func NewState() State {
	return State{Phase: Up, Workers: 1, ConvergedQueue: -1, Reason: "new job: one worker, measuring"}
}

// changed records a change of the worker count to w.
func (s *State) changed(w int, cfg Config, reason string) {
	s.Pause = cfg.PauseMetrics
	if w > s.Workers && cfg.PauseUp > 0 {
		s.Pause = cfg.PauseUp
	}
	s.Workers, s.Reason = w, reason
}

// Converge holds at w workers, with batchTime as the converged one: a
// decision the policy takes itself, and the state machine too when the
// allocation cannot give the worker asked for.
func (s *State) Converge(w int, batchTime float64, cfg Config, reason string) {
	if w != s.Workers {
		s.changed(w, cfg, reason)
	} else {
		s.Reason = reason
		if cfg.SettleOnConverge {
			s.Pause = cfg.PauseMetrics
		}
	}
	s.Phase, s.ConvergedBatchTime, s.ConvergedQueue, s.SinceRevisit = Converged, batchTime, -1, 0
}

// WorkerLost tells the policy that one of the job's workers died or left:
// the next metrics straddle the replacement, so they are ignored as after
// a change of its own.
func (s State) WorkerLost(cfg Config) State {
	s.Pause = cfg.PauseMetrics
	return s
}
