package pipeline

import (
	"context"
	"math"
	"runtime"
	"sync"
	"time"
)

// Autotuning: maps with `parallelism: auto` (or every map, with the spec's
// `autotune: true`) run as parallel maps whose number of active workers the
// pipeline revises while it runs. Every Options.TuneInterval a goroutine
// owned by the iterator takes the per-op statistics of the last interval,
// asks a Tuner for the parallelism of each map within the core budget
// (Options.Cores), and applies it. The tuner is pure: package
// pipeline/diagnose provides Plumber's (its LP over the measured loads,
// keeping the spec's structure: a running pipeline cannot insert
// prefetches) and registers it; without one, auto maps run at the budget's
// cores, untuned.

// Tuner returns the parallelism of each map (by index in Spec.Ops) that
// serves a pipeline best, given the statistics of its last interval and a
// core budget. Maps it leaves out keep theirs.
type Tuner func(window Stats, cores float64) (map[int]int, error)

var (
	tunerMu      sync.Mutex
	tunerFactory func(*Spec) Tuner
)

// RegisterTuner sets the tuner pipelines use when Options.Tuner is nil:
// f makes one for a spec. Package pipeline/diagnose registers Plumber's.
func RegisterTuner(f func(*Spec) Tuner) {
	tunerMu.Lock()
	tunerFactory = f
	tunerMu.Unlock()
}

func registeredTuner(s *Spec) Tuner {
	tunerMu.Lock()
	f := tunerFactory
	tunerMu.Unlock()
	if f == nil {
		return nil
	}
	return f(s)
}

// DefaultTuneInterval is Options.TuneInterval's default.
const DefaultTuneInterval = time.Second

// gate bounds how many of a parallel map's workers run at once; the tuner
// moves the bound. A worker takes a slot before it takes a job, so a
// parked worker holds nothing.
type gate struct {
	mu    sync.Mutex
	cond  sync.Cond
	limit int
	busy  int
}

func newGate(limit int) *gate {
	g := &gate{limit: limit}
	g.cond.L = &g.mu
	return g
}

// acquire waits for a slot; false once ctx has ended (wake must be
// registered on ctx for that to wake it).
func (g *gate) acquire(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for ctx.Err() == nil && g.busy >= g.limit {
		g.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	g.busy++
	return true
}

// wake wakes every waiter to check its context (context.AfterFunc). The
// lock orders it after a waiter's check or before it.
func (g *gate) wake() {
	g.mu.Lock()
	g.mu.Unlock() //nolint:staticcheck // an empty critical section is the point
	g.cond.Broadcast()
}

func (g *gate) release() {
	g.mu.Lock()
	g.busy--
	g.mu.Unlock()
	g.cond.Signal()
}

func (g *gate) set(limit int) {
	g.mu.Lock()
	g.limit = limit
	g.mu.Unlock()
	g.cond.Broadcast()
}

// tunedMap is one map the tuner drives.
type tunedMap struct {
	op   int // index in Spec.Ops
	max  int // workers started: the most it may get
	gate *gate
	st   *opStats
}

// tuning is an open pipeline's autotuning: its maps and their bounds.
type tuning struct {
	maps     []*tunedMap
	tuner    Tuner
	cores    func() float64
	interval time.Duration
}

// coreBudget is Options.Cores, or GOMAXPROCS.
func coreBudget(o Options) func() float64 {
	if o.Cores != nil {
		return o.Cores
	}
	return func() float64 { return float64(runtime.GOMAXPROCS(0)) }
}

// planTuning decides which maps are tuned, where each starts and how far
// it may go; nil when none is.
func planTuning(spec *Spec, c *compiled, o Options) *tuning {
	var t *tuning
	for i, op := range c.ops {
		m := op.op.Map
		if m == nil || (m.Parallelism != ParallelismAuto && !spec.Autotune) {
			continue
		}
		if t == nil {
			t = &tuning{cores: coreBudget(o), interval: o.TuneInterval, tuner: o.Tuner}
			if t.interval <= 0 {
				t.interval = DefaultTuneInterval
			}
			if t.tuner == nil {
				t.tuner = registeredTuner(spec)
			}
		}
		budget := int(min(math.Ceil(t.cores()), MaxParallelism))
		start := m.Parallelism
		if start == ParallelismAuto {
			start = 1
			if t.tuner == nil || o.DisableStats {
				start = max(budget, 1) // nothing will tune it
			}
		}
		t.maps = append(t.maps, &tunedMap{op: i, max: max(budget, start, 1), gate: newGate(start)})
	}
	return t
}

// find returns the tuned map of op i, or nil.
func (t *tuning) find(i int) *tunedMap {
	if t == nil {
		return nil
	}
	for _, m := range t.maps {
		if m.op == i {
			return m
		}
	}
	return nil
}

// run revises the tuned maps every interval until ctx ends. snapshot
// returns the pipeline's statistics so far.
func (t *tuning) run(ctx context.Context, snapshot func() Stats) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	last := snapshot()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur := snapshot()
		window, err := cur.Minus(last)
		if err != nil || len(window.Ops) == 0 || window.Ops[len(window.Ops)-1].ElementsOut == 0 {
			continue // nothing came out in the interval: nothing to learn
		}
		last = cur
		par, err := t.tuner(window, t.cores())
		if err != nil {
			continue
		}
		t.apply(par)
	}
}

// apply sets each tuned map's parallelism from par, within [1, max].
func (t *tuning) apply(par map[int]int) {
	for _, m := range t.maps {
		v, ok := par[m.op]
		if !ok {
			continue
		}
		v = min(max(v, 1), m.max)
		m.gate.set(v)
		m.st.parallelism.Store(int64(v))
	}
}
