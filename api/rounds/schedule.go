package rounds

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// MaxConsumers bounds the consumers of one round (NumConsumers of a
// coordinated job: m batches per round, one window of m batches).
const MaxConsumers = 256

// Errors of the round schedule that callers branch on (wrapped with context;
// test with errors.Is).
var (
	// ErrEmptyRotation: a rotation has no workers, or a removal would leave
	// it empty. Rounds in force under an empty rotation have no server, so
	// the job must keep at least one worker.
	ErrEmptyRotation = errors.New("rotation has no workers")
	// ErrDuplicateWorker: the worker is already in the rotation.
	ErrDuplicateWorker = errors.New("worker already in the rotation")
	// ErrUnknownWorker: the worker is not in the current rotation.
	ErrUnknownWorker = errors.New("worker not in the current rotation")
	// ErrChangeTooEarly: a change was asked to take effect at a round that a
	// consumer may already have reached, or not after the last change. Retry
	// with EarliestFrom.
	ErrChangeTooEarly = errors.New("change would take effect too early")
	// ErrNoRotation: no rotation is in force at the round (a negative round,
	// or a schedule that does not start at round 0).
	ErrNoRotation = errors.New("no rotation in force at the round")
)

// Change is one entry of a round schedule: from round From on, rounds are
// served by Workers in rotation, until the next change.
type Change struct {
	// From is the first round this rotation serves.
	From int64
	// Workers is the full rotation from round From on; order matters: round
	// r goes to Workers[r mod len(Workers)].
	Workers []string
}

// Schedule says which worker serves each round of a coordinated job: round r
// is served by rotation[r mod n] of the rotation in force at round r. It is
// the value Raft agrees on; changes take effect from an agreed future round so
// that no round a consumer may already be reading changes hands.
//
// A Schedule is a value: methods never modify it and return new schedules
// that share no mutable state with it, so a committed schedule can be read
// concurrently. Callers must not modify the slices they get from it.
//
// The modulus uses the absolute round, not the round relative to the change.
// That keeps WorkerFor independent of history, which is what lets Compact drop
// old changes without moving any later round.
type Schedule struct {
	// Changes are sorted by From, From strictly increasing, and
	// Changes[0].From == 0 (see Validate).
	Changes []Change
}

// NewSchedule returns the schedule in which workers serve, in this order,
// every round from round 0 on.
func NewSchedule(workers []string) (Schedule, error) {
	s := Schedule{Changes: []Change{{From: 0, Workers: slices.Clone(workers)}}}
	if err := s.Validate(); err != nil {
		return Schedule{}, fmt.Errorf("new round schedule: %w", err)
	}
	return s, nil
}

// Validate checks the invariants every method relies on for meaningful
// answers (the methods never panic on a schedule that fails it, but may
// return errors or empty results). Messages name the field.
func (s Schedule) Validate() error {
	if len(s.Changes) == 0 {
		return fmt.Errorf("changes: must not be empty (the first change starts at round 0): %w", ErrNoRotation)
	}
	if s.Changes[0].From != 0 {
		return fmt.Errorf("changes[0].from: must be 0, got %d: %w", s.Changes[0].From, ErrNoRotation)
	}
	for i, c := range s.Changes {
		if i > 0 && c.From <= s.Changes[i-1].From {
			return fmt.Errorf("changes[%d].from: must be greater than changes[%d].from (%d), got %d", i, i-1, s.Changes[i-1].From, c.From)
		}
		if err := validateRotation(c.Workers); err != nil {
			return fmt.Errorf("changes[%d].%w", i, err)
		}
	}
	return nil
}

func validateRotation(workers []string) error {
	if len(workers) == 0 {
		return fmt.Errorf("workers: %w", ErrEmptyRotation)
	}
	seen := make(map[string]struct{}, len(workers))
	for j, w := range workers {
		if w == "" {
			return fmt.Errorf("workers[%d]: worker name must not be empty", j)
		}
		if _, dup := seen[w]; dup {
			return fmt.Errorf("workers[%d]: %q: %w", j, w, ErrDuplicateWorker)
		}
		seen[w] = struct{}{}
	}
	return nil
}

// changeAt returns the index of the change in force at round, or -1 if none.
func (s Schedule) changeAt(round int64) int {
	return sort.Search(len(s.Changes), func(i int) bool { return s.Changes[i].From > round }) - 1
}

// WorkerFor returns the worker that serves round.
func (s Schedule) WorkerFor(round int64) (string, error) {
	if round < 0 {
		return "", fmt.Errorf("round %d: negative: %w", round, ErrNoRotation)
	}
	i := s.changeAt(round)
	if i < 0 {
		return "", fmt.Errorf("round %d: %w", round, ErrNoRotation)
	}
	rot := s.Changes[i].Workers
	if len(rot) == 0 {
		return "", fmt.Errorf("round %d: %w", round, ErrEmptyRotation)
	}
	return rot[round%int64(len(rot))], nil
}

// RotationAt returns a copy of the rotation in force at round, or nil if
// none is (negative round, invalid schedule).
func (s Schedule) RotationAt(round int64) []string {
	if round < 0 {
		return nil
	}
	i := s.changeAt(round)
	if i < 0 {
		return nil
	}
	return slices.Clone(s.Changes[i].Workers)
}

// Current returns a copy of the latest rotation: the one in force from
// LastFrom on.
func (s Schedule) Current() []string {
	if len(s.Changes) == 0 {
		return nil
	}
	return slices.Clone(s.Changes[len(s.Changes)-1].Workers)
}

// LastFrom is the round from which the latest change takes effect (0 for an
// empty schedule).
func (s Schedule) LastFrom() int64 {
	if len(s.Changes) == 0 {
		return 0
	}
	return s.Changes[len(s.Changes)-1].From
}

// EarliestFrom returns the first round a new change may take effect at, given
// minFrom, the first round no consumer has reached yet: the later of minFrom
// and the round after the last change. A worker that dies is removed from
// this round; a worker that joins is added from it (or later, to give it time
// to prepare its first round).
func (s Schedule) EarliestFrom(minFrom int64) int64 {
	if len(s.Changes) == 0 {
		return max(minFrom, 0)
	}
	return max(minFrom, s.LastFrom()+1)
}

// AddWorker returns a schedule in which w is appended to the rotation from
// round from on. from must be after the last change's round and >= minFrom,
// the first round no consumer has reached yet (so no round anyone is reading
// changes hands); otherwise the error wraps ErrChangeTooEarly.
func (s Schedule) AddWorker(w string, from, minFrom int64) (Schedule, error) {
	if err := s.checkChange(from, minFrom); err != nil {
		return Schedule{}, fmt.Errorf("add worker %q: %w", w, err)
	}
	if w == "" {
		return Schedule{}, fmt.Errorf("add worker: worker name must not be empty")
	}
	cur := s.Changes[len(s.Changes)-1].Workers
	if slices.Contains(cur, w) {
		return Schedule{}, fmt.Errorf("add worker %q: %w", w, ErrDuplicateWorker)
	}
	rot := make([]string, len(cur), len(cur)+1)
	copy(rot, cur)
	return s.with(Change{From: from, Workers: append(rot, w)}), nil
}

// RemoveWorker returns a schedule in which w leaves the rotation from round
// from on (the others keep their order). The constraints on from are those of
// AddWorker. Removing the last worker is an error wrapping ErrEmptyRotation;
// removing a worker not in the current rotation one wrapping
// ErrUnknownWorker. A worker that died should leave through Evict, which does
// not wait for changes already scheduled.
func (s Schedule) RemoveWorker(w string, from, minFrom int64) (Schedule, error) {
	if err := s.checkChange(from, minFrom); err != nil {
		return Schedule{}, fmt.Errorf("remove worker %q: %w", w, err)
	}
	cur := s.Changes[len(s.Changes)-1].Workers
	k := slices.Index(cur, w)
	if k < 0 {
		return Schedule{}, fmt.Errorf("remove worker %q: %w", w, ErrUnknownWorker)
	}
	if len(cur) == 1 {
		return Schedule{}, fmt.Errorf("remove worker %q: it is the only one: %w", w, ErrEmptyRotation)
	}
	rot := make([]string, 0, len(cur)-1)
	rot = append(append(rot, cur[:k]...), cur[k+1:]...)
	return s.with(Change{From: from, Workers: rot}), nil
}

// Evict returns a schedule in which w serves no round from round from on,
// where from >= minFrom (the first round no consumer has reached) may fall
// before changes already scheduled: those pending changes lose w too, and a
// pending change left equal to its predecessor is dropped. It is how a worker
// that died leaves at once (from = minFrom) instead of after the pending
// changes, so consumers never wait for a round no live worker serves.
// Rounds before from keep their workers. Errors wrap ErrChangeTooEarly,
// ErrUnknownWorker (w serves no round from from on) or ErrEmptyRotation (a
// rotation would be left empty).
func (s Schedule) Evict(w string, from, minFrom int64) (Schedule, error) {
	if err := s.Validate(); err != nil {
		return Schedule{}, fmt.Errorf("evict worker %q: invalid schedule: %w", w, err)
	}
	if from < minFrom {
		return Schedule{}, fmt.Errorf("evict worker %q: from round %d is before round %d, which a consumer may have reached: %w", w, from, minFrom, ErrChangeTooEarly)
	}
	if from < 0 {
		return Schedule{}, fmt.Errorf("evict worker %q: from round %d: %w", w, from, ErrNoRotation)
	}
	i := s.changeAt(from) // >= 0: Validate ensures Changes[0].From == 0
	out := make([]Change, 0, len(s.Changes)+1)
	out = append(out, s.Changes[:i]...)
	if s.Changes[i].From < from {
		out = append(out, s.Changes[i])
	}
	found := false
	for j, c := range s.Changes[i:] {
		k := slices.Index(c.Workers, w)
		if k < 0 {
			if j > 0 { // an untouched later change
				out = appendChange(out, c)
				continue
			}
			out = appendChange(out, Change{From: from, Workers: c.Workers})
			continue
		}
		found = true
		if len(c.Workers) == 1 {
			return Schedule{}, fmt.Errorf("evict worker %q: it is the only one from round %d: %w", w, max(c.From, from), ErrEmptyRotation)
		}
		rot := make([]string, 0, len(c.Workers)-1)
		rot = append(append(rot, c.Workers[:k]...), c.Workers[k+1:]...)
		out = appendChange(out, Change{From: max(c.From, from), Workers: rot})
	}
	if !found {
		return Schedule{}, fmt.Errorf("evict worker %q: it serves no round from %d on: %w", w, from, ErrUnknownWorker)
	}
	return Schedule{Changes: out}, nil
}

// appendChange appends c unless it repeats the last change's rotation (then
// it would change no round).
func appendChange(out []Change, c Change) []Change {
	if n := len(out); n > 0 && slices.Equal(out[n-1].Workers, c.Workers) {
		return out
	}
	return append(out, c)
}

// checkChange validates s and the round a change would take effect at.
func (s Schedule) checkChange(from, minFrom int64) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("invalid schedule: %w", err)
	}
	if from < minFrom {
		return fmt.Errorf("from round %d is before round %d, which a consumer may have reached: %w", from, minFrom, ErrChangeTooEarly)
	}
	if last := s.LastFrom(); from <= last {
		return fmt.Errorf("from round %d is not after the last change (round %d): %w", from, last, ErrChangeTooEarly)
	}
	return nil
}

// with returns a copy of s with c appended; it never appends into s's array.
func (s Schedule) with(c Change) Schedule {
	out := make([]Change, len(s.Changes), len(s.Changes)+1)
	copy(out, s.Changes)
	return Schedule{Changes: append(out, c)}
}

// RoundsOf lists, in increasing order, the rounds in [lo, hi) that worker
// serves (workers prepare their rounds ahead). The result has at most
// (hi-lo)/n + 1 entries per change overlapping the range, n being that
// change's rotation size, so callers bound it by the range they ask for.
func (s Schedule) RoundsOf(worker string, lo, hi int64) []int64 {
	lo = max(lo, 0)
	if hi <= lo {
		return nil
	}
	var out []int64
	for i := max(s.changeAt(lo), 0); i < len(s.Changes); i++ {
		c := s.Changes[i]
		if c.From >= hi {
			break
		}
		start, end := max(lo, c.From), hi
		if i+1 < len(s.Changes) {
			end = min(end, s.Changes[i+1].From)
		}
		k := slices.Index(c.Workers, worker)
		if start >= end || k < 0 {
			continue
		}
		n := int64(len(c.Workers))
		r, ok := firstServed(start, int64(k), n)
		for ok && r < end {
			out = append(out, r)
			if r > math.MaxInt64-n {
				break
			}
			r += n
		}
	}
	return out
}

// NextRoundOf returns the first round >= r that worker serves, or false if
// there is none, e.g. because it has been removed from the latest rotation
// (or never was in it) and serves no round between r and the removal.
func (s Schedule) NextRoundOf(worker string, r int64) (int64, bool) {
	r = max(r, 0)
	for i := max(s.changeAt(r), 0); i < len(s.Changes); i++ {
		c := s.Changes[i]
		start, end, last := max(r, c.From), int64(math.MaxInt64), i+1 == len(s.Changes)
		if !last {
			end = s.Changes[i+1].From
		}
		k := slices.Index(c.Workers, worker)
		if k < 0 || (start >= end && !last) {
			continue
		}
		if cand, ok := firstServed(start, int64(k), int64(len(c.Workers))); ok && (last || cand < end) {
			return cand, true
		}
	}
	return 0, false
}

// firstServed returns the first round >= start (start >= 0) congruent to k
// modulo n (0 <= k < n), or false if it would overflow int64.
func firstServed(start, k, n int64) (int64, bool) {
	base := start - start%n
	if base > math.MaxInt64-k {
		return 0, false
	}
	r := base + k
	if r < start {
		if r > math.MaxInt64-n {
			return 0, false
		}
		r += n
	}
	return r, true
}

// Compact returns a schedule without the changes that no round >= keepFrom
// uses, so the state Raft keeps stays bounded by the changes still ahead of
// the slowest consumer. WorkerFor is unchanged for every round >= keepFrom;
// rounds before keepFrom are forgotten (the kept change in force at keepFrom
// is moved to start at round 0, which the absolute-round modulus allows).
func (s Schedule) Compact(keepFrom int64) Schedule {
	i := s.changeAt(keepFrom)
	if i <= 0 {
		return Schedule{Changes: slices.Clone(s.Changes)}
	}
	out := slices.Clone(s.Changes[i:])
	out[0].From = 0
	return Schedule{Changes: out}
}
