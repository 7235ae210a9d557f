package rounds

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// sched builds a schedule literal: pairs of (from, "a b c").
func sched(pairs ...any) Schedule {
	var s Schedule
	for i := 0; i+1 < len(pairs); i += 2 {
		s.Changes = append(s.Changes, Change{From: int64(pairs[i].(int)), Workers: strings.Fields(pairs[i+1].(string))})
	}
	return s
}

func TestNewSchedule(t *testing.T) {
	cases := []struct {
		workers []string
		err     error  // errors.Is target, if any
		msg     string // substring of the error, if any
	}{
		{workers: []string{"a"}},
		{workers: []string{"a", "b", "c"}},
		{workers: nil, err: ErrEmptyRotation},
		{workers: []string{}, err: ErrEmptyRotation},
		{workers: []string{"a", "b", "a"}, err: ErrDuplicateWorker, msg: "workers[2]"},
		{workers: []string{"a", ""}, msg: "workers[1]: worker name must not be empty"},
	}
	for _, c := range cases {
		s, err := NewSchedule(c.workers)
		if c.err == nil && c.msg == "" {
			if err != nil {
				t.Errorf("NewSchedule(%q): %v", c.workers, err)
				continue
			}
			if got := s.RotationAt(0); !slices.Equal(got, c.workers) {
				t.Errorf("NewSchedule(%q): rotation %q", c.workers, got)
			}
			continue
		}
		if err == nil || (c.err != nil && !errors.Is(err, c.err)) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("NewSchedule(%q) = %v, want %v containing %q", c.workers, err, c.err, c.msg)
		}
	}
	// The schedule does not alias the caller's slice.
	ws := []string{"a", "b"}
	s, _ := NewSchedule(ws)
	ws[0] = "z"
	if w, _ := s.WorkerFor(0); w != "a" {
		t.Errorf("schedule aliases the caller's slice: round 0 -> %q", w)
	}
}

func TestScheduleValidate(t *testing.T) {
	cases := []struct {
		s   Schedule
		msg string // "" means valid
	}{
		{sched(0, "a"), ""},
		{sched(0, "a b", 5, "a", 9, "c a"), ""},
		{Schedule{}, "changes: must not be empty"},
		{sched(1, "a"), "changes[0].from: must be 0, got 1"},
		{sched(0, "a", 5, "b", 5, "c"), "changes[2].from: must be greater than changes[1].from (5), got 5"},
		{sched(0, "a", 5, "b", 3, "c"), "changes[2].from: must be greater"},
		{sched(0, "a", 5, ""), "changes[1].workers: rotation has no workers"},
		{sched(0, "a b a"), "changes[0].workers[2]: \"a\": worker already"},
		{Schedule{Changes: []Change{{0, []string{"a", ""}}}}, "changes[0].workers[1]: worker name must not be empty"},
	}
	for i, c := range cases {
		err := c.s.Validate()
		if c.msg == "" && err != nil {
			t.Errorf("case %d: %v", i, err)
		}
		if c.msg != "" && (err == nil || !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("case %d: Validate = %v, want %q", i, err, c.msg)
		}
	}
}

func TestWorkerFor(t *testing.T) {
	s := sched(0, "a b c", 7, "a b c d", 10, "d b")
	cases := []struct {
		round int64
		want  string
	}{
		{0, "a"}, {1, "b"}, {2, "c"}, {3, "a"}, {6, "a"},
		{7, "d"}, {8, "a"}, {9, "b"}, // 7 mod 4 = 3
		{10, "d"}, {11, "b"}, {12, "d"}, {1 << 40, "d"}, {1<<40 + 1, "b"},
		{math.MaxInt64, "b"},
	}
	for _, c := range cases {
		got, err := s.WorkerFor(c.round)
		if err != nil || got != c.want {
			t.Errorf("WorkerFor(%d) = %q, %v; want %q", c.round, got, err, c.want)
		}
	}
	bad := []struct {
		s     Schedule
		round int64
		err   error
	}{
		{s, -1, ErrNoRotation},
		{s, math.MinInt64, ErrNoRotation},
		{Schedule{}, 0, ErrNoRotation},
		{sched(3, "a"), 2, ErrNoRotation},
		{sched(0, "a", 4, ""), 5, ErrEmptyRotation},
	}
	for _, c := range bad {
		if w, err := c.s.WorkerFor(c.round); !errors.Is(err, c.err) {
			t.Errorf("%v.WorkerFor(%d) = %q, %v; want %v", c.s, c.round, w, err, c.err)
		}
	}
	if got := s.RotationAt(8); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("RotationAt(8) = %q", got)
	}
	if got := s.RotationAt(-1); got != nil {
		t.Errorf("RotationAt(-1) = %q", got)
	}
	if got := s.Current(); !slices.Equal(got, []string{"d", "b"}) {
		t.Errorf("Current = %q", got)
	}
	s.RotationAt(0)[0] = "x"
	s.Current()[0] = "x"
	if w, _ := s.WorkerFor(0); w != "a" {
		t.Error("RotationAt returned the schedule's own slice")
	}
	if w, _ := s.WorkerFor(10); w != "d" {
		t.Error("Current returned the schedule's own slice")
	}
}

func TestAddRemoveWorker(t *testing.T) {
	base := sched(0, "a b", 10, "a b c")
	type op struct {
		add           bool
		w             string
		from, minFrom int64
	}
	cases := []struct {
		name string
		op   op
		want Schedule // zero if an error is expected
		err  error
		msg  string
	}{
		{"add", op{true, "d", 11, 11}, sched(0, "a b", 10, "a b c", 11, "a b c d"), nil, ""},
		{"add later than minFrom", op{true, "d", 20, 3}, sched(0, "a b", 10, "a b c", 20, "a b c d"), nil, ""},
		{"remove middle", op{false, "b", 12, 12}, sched(0, "a b", 10, "a b c", 12, "a c"), nil, ""},
		{"remove first", op{false, "a", 12, 0}, sched(0, "a b", 10, "a b c", 12, "b c"), nil, ""},
		{"add before minFrom", op{true, "d", 11, 12}, Schedule{}, ErrChangeTooEarly, "before round 12"},
		{"add at last change", op{true, "d", 10, 0}, Schedule{}, ErrChangeTooEarly, "not after the last change (round 10)"},
		{"add before last change", op{true, "d", 5, 0}, Schedule{}, ErrChangeTooEarly, ""},
		{"remove before minFrom", op{false, "a", 30, 31}, Schedule{}, ErrChangeTooEarly, ""},
		{"add duplicate", op{true, "c", 11, 11}, Schedule{}, ErrDuplicateWorker, `"c"`},
		{"add empty name", op{true, "", 11, 11}, Schedule{}, nil, "must not be empty"},
		{"remove unknown", op{false, "z", 11, 11}, Schedule{}, ErrUnknownWorker, `"z"`},
	}
	for _, c := range cases {
		var got Schedule
		var err error
		if c.op.add {
			got, err = base.AddWorker(c.op.w, c.op.from, c.op.minFrom)
		} else {
			got, err = base.RemoveWorker(c.op.w, c.op.from, c.op.minFrom)
		}
		if c.want.Changes == nil {
			if err == nil || (c.err != nil && !errors.Is(err, c.err)) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: err = %v, want %v containing %q", c.name, err, c.err, c.msg)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if fmt.Sprint(base) != fmt.Sprint(sched(0, "a b", 10, "a b c")) {
		t.Errorf("base schedule modified: %v", base)
	}

	one := sched(0, "a")
	if _, err := one.RemoveWorker("a", 1, 1); !errors.Is(err, ErrEmptyRotation) {
		t.Errorf("removing the only worker: %v", err)
	}
	if _, err := sched(1, "a").AddWorker("b", 5, 5); err == nil || !strings.Contains(err.Error(), "invalid schedule") {
		t.Errorf("change on an invalid schedule: %v", err)
	}

	// Two schedules derived from the same one share no storage.
	s1, err1 := one.AddWorker("b", 1, 1)
	s2, err2 := one.AddWorker("c", 1, 1)
	s3, err3 := s1.AddWorker("d", 2, 2)
	s4, err4 := s1.RemoveWorker("a", 2, 2)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	want := []string{"0:[a] 1:[a b]", "0:[a] 1:[a c]", "0:[a] 1:[a b] 2:[a b d]", "0:[a] 1:[a b] 2:[b]"}
	for i, s := range []Schedule{s1, s2, s3, s4} {
		if got := describe(s); got != want[i] {
			t.Errorf("derived schedule %d = %s, want %s", i, got, want[i])
		}
	}
}

func TestEvict(t *testing.T) {
	// A join of d is pending at 20, a leave of a at 30.
	base := sched(0, "a b c", 20, "a b c d", 30, "b c d")
	cases := []struct {
		w             string
		from, minFrom int64
		want          string
		err           error
	}{
		{"b", 12, 12, "0:[a b c] 12:[a c] 20:[a c d] 30:[c d]", nil},
		{"b", 20, 15, "0:[a b c] 20:[a c d] 30:[c d]", nil},
		{"a", 12, 12, "0:[a b c] 12:[b c] 20:[b c d]", nil}, // the pending leave of a is now moot
		{"d", 12, 12, "0:[a b c] 30:[b c]", nil},            // the pending join of d is cancelled
		{"d", 25, 25, "0:[a b c] 20:[a b c d] 25:[a b c] 30:[b c]", nil},
		{"c", 40, 35, "0:[a b c] 20:[a b c d] 30:[b c d] 40:[b d]", nil},
		{"b", 0, 0, "0:[a c] 20:[a c d] 30:[c d]", nil},
		{"b", 11, 12, "", ErrChangeTooEarly},
		{"z", 12, 12, "", ErrUnknownWorker},
		{"a", 31, 31, "", ErrUnknownWorker},
		{"b", -1, -5, "", ErrNoRotation},
	}
	for _, c := range cases {
		got, err := base.Evict(c.w, c.from, c.minFrom)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Evict(%q, %d, %d) = %v, want %v", c.w, c.from, c.minFrom, err, c.err)
			}
			continue
		}
		if err != nil || describe(got) != c.want {
			t.Errorf("Evict(%q, %d, %d) = %s, %v; want %s", c.w, c.from, c.minFrom, describe(got), err, c.want)
		}
	}
	if describe(base) != "0:[a b c] 20:[a b c d] 30:[b c d]" {
		t.Errorf("Evict modified its receiver: %s", describe(base))
	}
	if _, err := sched(0, "a b", 5, "a").Evict("a", 3, 3); !errors.Is(err, ErrEmptyRotation) {
		t.Errorf("evicting the last worker of a pending rotation: %v", err)
	}
	if _, err := sched(1, "a b").Evict("a", 3, 3); err == nil || !strings.Contains(err.Error(), "invalid schedule") {
		t.Errorf("evict on an invalid schedule: %v", err)
	}
}

func describe(s Schedule) string {
	var parts []string
	for _, c := range s.Changes {
		parts = append(parts, fmt.Sprintf("%d:%v", c.From, c.Workers))
	}
	return strings.Join(parts, " ")
}

func TestEarliestFrom(t *testing.T) {
	s := sched(0, "a", 10, "a b")
	for _, c := range []struct{ minFrom, want int64 }{{0, 11}, {11, 11}, {12, 12}, {-4, 11}} {
		if got := s.EarliestFrom(c.minFrom); got != c.want {
			t.Errorf("EarliestFrom(%d) = %d, want %d", c.minFrom, got, c.want)
		}
	}
	if got := (Schedule{}).EarliestFrom(-3); got != 0 {
		t.Errorf("empty schedule: EarliestFrom(-3) = %d", got)
	}
	if s.LastFrom() != 10 || (Schedule{}).LastFrom() != 0 {
		t.Errorf("LastFrom = %d", s.LastFrom())
	}
}

func TestRoundsOfNextRoundOf(t *testing.T) {
	s := sched(0, "a b c", 7, "a b c d", 10, "d b")
	// rounds: 0a 1b 2c 3a 4b 5c 6a | 7d 8a 9b | 10d 11b 12d 13b ...
	cases := []struct {
		w      string
		lo, hi int64
		want   []int64
	}{
		{"a", 0, 10, []int64{0, 3, 6, 8}},
		{"a", 0, 100, []int64{0, 3, 6, 8}},
		{"a", 4, 8, []int64{6}},
		{"b", 0, 14, []int64{1, 4, 9, 11, 13}},
		{"c", 0, 14, []int64{2, 5}},
		{"d", 0, 14, []int64{7, 10, 12}},
		{"d", -5, 8, []int64{7}},
		{"b", 9, 10, []int64{9}},
		{"b", 10, 10, nil},
		{"b", 12, 10, nil},
		{"z", 0, 100, nil},
		{"b", math.MaxInt64 - 4, math.MaxInt64, []int64{math.MaxInt64 - 4, math.MaxInt64 - 2}},
	}
	for _, c := range cases {
		if got := s.RoundsOf(c.w, c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("RoundsOf(%q, %d, %d) = %v, want %v", c.w, c.lo, c.hi, got, c.want)
		}
	}
	next := []struct {
		w    string
		r    int64
		want int64
		ok   bool
	}{
		{"a", 0, 0, true}, {"a", 1, 3, true}, {"a", 7, 8, true}, {"a", 9, 0, false},
		{"c", 5, 5, true}, {"c", 6, 0, false}, {"c", 100, 0, false},
		{"d", 0, 7, true}, {"d", 8, 10, true}, {"d", 13, 14, true}, {"d", -3, 7, true},
		{"b", 10, 11, true}, {"b", math.MaxInt64 - 1, math.MaxInt64, true},
		{"d", math.MaxInt64, 0, false}, // round MaxInt64 is b's, and there is no next one
		{"z", 0, 0, false},
	}
	for _, c := range next {
		got, ok := s.NextRoundOf(c.w, c.r)
		if got != c.want || ok != c.ok {
			t.Errorf("NextRoundOf(%q, %d) = %d, %v; want %d, %v", c.w, c.r, got, ok, c.want, c.ok)
		}
	}
}

func TestCompact(t *testing.T) {
	s := sched(0, "a b c", 7, "a b c d", 10, "d b")
	cases := []struct {
		keepFrom int64
		want     string
	}{
		{-1, "0:[a b c] 7:[a b c d] 10:[d b]"},
		{0, "0:[a b c] 7:[a b c d] 10:[d b]"},
		{6, "0:[a b c] 7:[a b c d] 10:[d b]"},
		{7, "0:[a b c d] 10:[d b]"},
		{9, "0:[a b c d] 10:[d b]"},
		{10, "0:[d b]"},
		{1000, "0:[d b]"},
	}
	for _, c := range cases {
		got := s.Compact(c.keepFrom)
		if describe(got) != c.want {
			t.Errorf("Compact(%d) = %s, want %s", c.keepFrom, describe(got), c.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Compact(%d): %v", c.keepFrom, err)
		}
		for r := max(c.keepFrom, 0); r < 30; r++ {
			a, _ := s.WorkerFor(r)
			b, _ := got.WorkerFor(r)
			if a != b {
				t.Errorf("Compact(%d): round %d moved from %q to %q", c.keepFrom, r, a, b)
			}
		}
	}
	if describe(s) != "0:[a b c] 7:[a b c d] 10:[d b]" {
		t.Errorf("Compact modified its receiver: %s", describe(s))
	}
}
