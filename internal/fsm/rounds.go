package fsm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/api/rounds"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Coordinated reads in the replicated state.
//
// A coordinated job (JobOptions.Coordinated) carries a RoundState: the round
// schedule (which worker serves round r) and, per consumer index, the round
// that consumer has reached. The rules, all applied inside the FSM so every
// replica agrees:
//
//   - Until the first ReportRound the job has not started: AssignTask appends
//     the worker to the rotation from round 0 and ExpireWorker removes it from
//     round 0 (no consumer may read a round before its first report commits).
//   - After the start, AssignTask adds the worker (AddWorker) and ExpireWorker
//     evicts it (Evict) from round max(Reached) + RoundLookahead, or after
//     the last change if that is later. A consumer never reads a round at or
//     beyond its own last committed report + RoundLookahead (its horizon),
//     and learns the schedule in the same answer that moves its horizon, so
//     no round a consumer may read changes hands.
//   - Rounds of an expired worker before its eviction round are skipped by the
//     consumers (they never wait for a worker that is gone).
//   - Evicting the only worker of a rotation is not possible; its rounds are
//     skipped until a worker joins.
//   - ReportRound keeps the highest round per index and compacts the schedule
//     below the lowest round every index has reached.

// RoundLookahead is how many rounds past its last committed report a
// consumer may read, and so how far ahead of the furthest consumer a
// rotation change takes effect. A constant: every replica must compute the
// same change rounds.
const RoundLookahead = 64

// maxRound bounds a reported round, so max(Reached) + RoundLookahead cannot
// overflow.
const maxRound = 1 << 60

// RoundState is a coordinated job's round schedule and consumer progress.
type RoundState struct {
	// Schedule says which worker serves each round.
	Schedule rounds.Schedule `cbor:"1,keyasint" json:"schedule"`
	// Reached maps consumer index → the highest round it reported reaching.
	Reached map[int]int64 `cbor:"2,keyasint" json:"reached"`
	// Started: a consumer has reported; changes now take effect ahead.
	Started bool `cbor:"3,keyasint" json:"started"`
}

func (r *RoundState) clone() *RoundState {
	if r == nil {
		return nil
	}
	c := *r
	c.Reached = maps.Clone(r.Reached)
	c.Schedule = rounds.Schedule{Changes: slices.Clone(r.Schedule.Changes)}
	for i := range c.Schedule.Changes {
		c.Schedule.Changes[i].Workers = slices.Clone(r.Schedule.Changes[i].Workers)
	}
	return &c
}

// maxReached is the furthest round any consumer reported (0 if none).
func (r *RoundState) maxReached() int64 {
	var m int64
	for _, v := range r.Reached {
		m = max(m, v)
	}
	return m
}

// minFrom is the first round a change may take effect at.
func (r *RoundState) minFrom() int64 {
	if !r.Started {
		return 0
	}
	return r.maxReached() + RoundLookahead
}

// addWorker puts w in the rotation (see the rules above); a worker already
// in the latest rotation is left alone.
func (r *RoundState) addWorker(w string) {
	cur := r.Schedule.Current()
	if slices.Contains(cur, w) {
		return
	}
	if !r.Started || len(r.Schedule.Changes) == 0 {
		if s, err := rounds.NewSchedule(append(cur, w)); err == nil {
			r.Schedule = s
		}
		return
	}
	mf := r.minFrom()
	if s, err := r.Schedule.AddWorker(w, r.Schedule.EarliestFrom(mf), mf); err == nil {
		r.Schedule = s
	}
}

// evictWorker takes w out of the rotation (see the rules above); the only
// worker stays (its rounds are skipped while it is expired).
func (r *RoundState) evictWorker(w string) {
	if !r.Started {
		cur := r.Schedule.Current()
		if k := slices.Index(cur, w); k >= 0 && len(cur) > 1 {
			if s, err := rounds.NewSchedule(slices.Delete(cur, k, k+1)); err == nil {
				r.Schedule = s
			}
		}
		return
	}
	mf := r.minFrom()
	if s, err := r.Schedule.Evict(w, mf, mf); err == nil {
		r.Schedule = s
	}
}

// validate checks a decoded RoundState against its job.
func (r *RoundState) validate(j *Job) error {
	if len(r.Schedule.Changes) > 0 {
		if err := r.Schedule.Validate(); err != nil {
			return err
		}
	}
	for i, v := range r.Reached {
		if i < 0 || i >= j.Options.NumConsumers() || v < 0 || v > maxRound {
			return fmt.Errorf("reached[%d] = %d", i, v)
		}
	}
	return nil
}

// validateCoordinated checks the options a coordinated job needs.
func (o JobOptions) validateCoordinated() []string {
	if !o.Coordinated {
		if o.PadFinalRound {
			return []string{"pad_final_round without coordinated"}
		}
		return nil
	}
	var errs []string
	if o.Sharding != splits.Dynamic {
		errs = append(errs, fmt.Sprintf("coordinated with sharding %v (want dynamic: workers read disjoint splits)", o.Sharding))
	}
	if o.NumConsumers < 1 || o.NumConsumers > rounds.MaxConsumers {
		errs = append(errs, fmt.Sprintf("coordinated with num_consumers %d (want 1..%d)", o.NumConsumers, rounds.MaxConsumers))
	}
	if o.Share {
		errs = append(errs, "coordinated with share")
	}
	return errs
}
