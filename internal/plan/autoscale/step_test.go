package autoscale_test

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// scaleModel is a job as the autoscaler sees it: workers each deliver a
// batch in worker seconds, the model takes model seconds per batch; the
// batch time is the slower of the two, and the result queue grows when the
// workers outpace the model.
type scaleModel struct{ worker, model float64 }

func (m scaleModel) metric(w int, noise float64) autoscale.Metric {
	supply := m.worker / float64(w)
	bt := max(supply, m.model) * (1 + noise)
	q := max(0, 8*(m.model/supply-1))
	return autoscale.Metric{BatchTime: bt, ResultQueue: q}
}

// stalled is metric with the consumer's stall (the share of the batch
// time spent waiting for the workers) and a batch count, as a client
// reports them.
func (m scaleModel) stalled(w int, noise float64) autoscale.Metric {
	sm := m.metric(w, noise)
	sm.Stall, sm.Batches = max(0, 1-m.model*(1+noise)/sm.BatchTime), 100
	return sm
}

var testScaleConfig = autoscale.Config{Threshold: 0.03, RevisitEvery: 3, UpRatio: 0.10, DownQueueRatio: 0.40, PauseMetrics: 1, BatchesPerMetric: 100}

// unallocatedConfig and allocatedConfig are the configurations the state
// machine steps its jobs with (fsm's scaleConfig and scaleConfigAllocated,
// which fsm's TestScaleConfigs pins to these values).
var (
	unallocatedConfig = func() autoscale.Config {
		c := autoscale.DefaultConfig()
		c.NoScaleDown = true
		return c
	}()
	allocatedConfig = func() autoscale.Config {
		c := autoscale.DefaultConfig()
		c.StallBound, c.QueueMin, c.SettleOnConverge, c.PauseUp = true, 4, true, 1
		return c
	}()
)

// run feeds n metrics of model (with noise[i%len(noise)]) to s.
func runScale(s autoscale.State, m scaleModel, n, limit int, noise []float64) autoscale.State {
	for i := 0; i < n; i++ {
		nz := 0.0
		if len(noise) > 0 {
			nz = noise[i%len(noise)]
		}
		s = autoscale.Step(s, m.metric(s.Workers, nz), testScaleConfig, limit)
	}
	return s
}

// plateauModel is 100 ms of work per batch and a model that takes 25
// ms: 4 workers keep up, a fifth brings nothing.
var plateauModel = scaleModel{worker: 0.100, model: 0.025}

// TestStepAutoscale: the ramp converges at the plateau, through noise
// within the threshold, or at the mesh's limit.
func TestStepAutoscale(t *testing.T) {
	m := plateauModel
	for _, c := range []struct {
		name  string
		noise []float64
		limit int
		want  int
	}{
		{"improving, then the plateau", nil, 16, 4},
		{"noise within the threshold", []float64{0.01, -0.01, 0.005, -0.012, 0}, 16, 4},
		{"the mesh's limit", nil, 3, 3},
	} {
		s := runScale(autoscale.NewState(), m, 40, c.limit, c.noise)
		if s.Phase != autoscale.Converged || s.Workers != c.want {
			t.Errorf("%s: %v at %d workers (%s), want converged at %d", c.name, s.Phase, s.Workers, s.Reason, c.want)
		}
	}

}

// TestStepAutoscaleStallBound: a consumer that hardly waits ends the
// ramp, and keeps a converged job where it is.
func TestStepAutoscaleStallBound(t *testing.T) {
	m := plateauModel
	// With StallBound (the allocated jobs' configuration), a window in
	// which the consumer hardly waits ends the ramp: the plateau is found
	// without trying a fifth worker, a consumer that one worker feeds
	// converges at 1 at the first window, and noise that would pass for a
	// gain (+6 % on the fifth worker's window) is not taken for one.
	bound := testScaleConfig
	bound.StallBound = true
	for _, c := range []struct {
		name  string
		m     scaleModel
		noise []float64
		want  int
		peak  int // the most workers ever asked for
	}{
		{"stall bound: improving, then the plateau", m, nil, 4, 4},
		{"stall bound: one worker feeds the consumer", scaleModel{worker: 0.020, model: 0.025}, nil, 1, 1},
		{"stall bound: noise within the threshold", m, []float64{0.01, -0.01, 0.005, -0.012, 0}, 4, 4},
	} {
		st, peak := autoscale.NewState(), 1
		for i := 0; i < 40; i++ {
			nz := 0.0
			if len(c.noise) > 0 {
				nz = c.noise[i%len(c.noise)]
			}
			st = autoscale.Step(st, c.m.stalled(st.Workers, nz), bound, 16)
			peak = max(peak, st.Workers)
		}
		if st.Phase != autoscale.Converged || st.Workers != c.want || peak != c.peak {
			t.Errorf("%s: %v at %d workers, %d at most (%s); want converged at %d, %d at most", c.name, st.Phase, st.Workers, peak, st.Reason, c.want, c.peak)
		}
	}
	// Without a stall in the metric (Batches 0: a client that does not
	// report it), the bound does not apply: the fifth worker is tried.
	st, peak := autoscale.NewState(), 1
	for i := 0; i < 40; i++ {
		st = autoscale.Step(st, m.metric(st.Workers, 0), bound, 16)
		peak = max(peak, st.Workers)
	}
	if st.Workers != 4 || peak != 5 {
		t.Errorf("no stall reported: %d workers, %d at most; want 4 after trying 5", st.Workers, peak)
	}
	// A converged job whose model slows while it hardly waits: the batch
	// time rises well above the converged one, but no worker is added.
	st = runScale(autoscale.NewState(), m, 40, 16, nil)
	slowModel := scaleModel{worker: 0.100, model: 0.028} // 12 % slower, a queue under 1
	peak = 0
	for i := 0; i < 10; i++ {
		st = autoscale.Step(st, slowModel.stalled(st.Workers, 0), bound, 16)
		peak = max(peak, st.Workers)
	}
	if peak != 4 {
		t.Errorf("a fed consumer's model slowed: up to %d workers (%s), want 4 throughout", peak, st.Reason)
	}

}

// TestStepAutoscaleSettlingQueue: a plateau's queue, filling and
// wavering, sets off no scale-down with the allocated configuration.
func TestStepAutoscaleSettlingQueue(t *testing.T) {
	// At the plateau the result queue fills towards the consumer's bound
	// after the decision converged, then wavers by a few batches: with the
	// allocated jobs' configuration neither sets off a scale-down (the
	// converged queue is taken once it settled, and a growth under 4
	// batches is not outpacing), where the first metric's queue and a
	// 1-batch floor would have.
	filling := []float64{0.5, 3, 6, 7, 5, 6, 7.5, 6, 5, 7, 6, 7.5, 6, 7, 6.5, 7.5, 5.5, 6, 7, 7.5, 6, 7.5, 6, 7, 7.5}
	wavering := []float64{1, 1.1, 1.2, 1, 1.3, 2.6, 2, 2.6, 1.5, 2.6, 2.2, 2.6, 2.4, 2.6, 2, 2.6, 2.5, 2.6, 2.6, 2.6, 2.6, 2.6, 2.6, 2.6, 2.6}
	plateauQueue := func(cfg autoscale.Config, queue []float64) autoscale.State {
		st := autoscale.NewState()
		st.Workers, st.Base = 3, 0.012 // the third worker brings 17 %, and the consumer is fed
		st = autoscale.Step(st, autoscale.Metric{BatchTime: 0.010, Stall: 0.001, Batches: 100}, cfg, 16)
		for i, q := range queue {
			st = autoscale.Step(st, autoscale.Metric{BatchTime: 0.010 * (1 + 0.01*float64(i%3)), ResultQueue: q, Stall: 0.001, Batches: 100}, cfg, 16)
		}
		return st
	}
	for _, q := range [][]float64{filling, wavering} {
		if st := plateauQueue(allocatedConfig, q); st.Phase != autoscale.Converged || st.Workers != 3 || st.Changes != 0 {
			t.Errorf("a settling queue: %v at %d after %d changes (%s), want converged at 3 throughout", st.Phase, st.Workers, st.Changes, st.Reason)
		}
	}
	for _, c := range []struct {
		name  string
		queue []float64
		tweak func(*autoscale.Config)
	}{
		{"the first metric's queue", filling, func(c *autoscale.Config) { c.SettleOnConverge = false }},
		{"a 1-batch floor", wavering, func(c *autoscale.Config) { c.QueueMin = 0 }},
	} {
		cfg := allocatedConfig
		c.tweak(&cfg)
		if st := plateauQueue(cfg, c.queue); st.Workers == 3 && st.Phase == autoscale.Converged {
			t.Errorf("with %s, the queue should have set off a scale-down try: %+v", c.name, st)
		}
	}
}

// TestStepAutoscaleScaleDown: the workers given back when the model
// slows, and the tries that bring one back.
func TestStepAutoscaleScaleDown(t *testing.T) {
	m := plateauModel
	// A scale-down try during which the consumer is fed from its queue:
	// the batch time holds, but the queue drains, so the worker comes
	// back (with a 1-batch floor, the rule is off, and the job would go
	// on down to 2).
	drainTry := func(cfg autoscale.Config) autoscale.State {
		st := autoscale.State{Phase: autoscale.Converged, Workers: 4, ConvergedBatchTime: 0.010, ConvergedQueue: 5, SinceRevisit: cfg.RevisitEvery - 1}
		st = autoscale.Step(st, autoscale.Metric{BatchTime: 0.010, ResultQueue: 20, Stall: 0.001, Batches: 100}, cfg, 16)
		if st.Phase != autoscale.Down || st.Workers != 3 {
			t.Fatalf("a stocked queue at a revisit: %+v, want a try of 3", st)
		}
		for _, q := range []float64{18, 15, 12} {
			st = autoscale.Step(st, autoscale.Metric{BatchTime: 0.010, ResultQueue: q, Stall: 0.001, Batches: 100}, cfg, 16)
		}
		return st
	}
	st := drainTry(allocatedConfig)
	if st.Phase != autoscale.Converged || st.Workers != 4 || !strings.Contains(st.Reason, "drains") {
		t.Errorf("a draining queue: %v at %d (%s), want back to 4", st.Phase, st.Workers, st.Reason)
	}
	// The queue refills to where the try failed, and a little past it:
	// no new try until it grows well past 20.
	for i := 0; i < 3*allocatedConfig.RevisitEvery; i++ {
		st = autoscale.Step(st, autoscale.Metric{BatchTime: 0.010, ResultQueue: 10 + float64(i)/3, Stall: 0.001, Batches: 100}, allocatedConfig, 16)
		if st.Workers != 4 {
			t.Fatalf("queue %.1f after a failed try at 20: %+v", 10+float64(i)/3, st)
		}
	}
	noFloor := allocatedConfig
	noFloor.QueueMin = 0
	if st := drainTry(noFloor); st.Workers != 2 {
		t.Errorf("without the drain rule: %v at %d (%s), want a try of 2", st.Phase, st.Workers, st.Reason)
	}

	// Converged at 4, then the model slows to 50 ms a batch: the workers
	// outpace it, the queue grows, and the job gives back workers down to
	// the 2 that still keep up.
	s := runScale(autoscale.NewState(), m, 40, 16, nil)
	slow := scaleModel{worker: 0.100, model: 0.050}
	s = runScale(s, slow, 40, 16, nil)
	if s.Phase != autoscale.Converged || s.Workers != 2 || !strings.Contains(s.Reason, "back to 2") {
		t.Errorf("ingestion slowed: %v at %d workers (%s), want converged at 2", s.Phase, s.Workers, s.Reason)
	}
	// The model slows below what one worker makes, and its batch time is
	// noisy (±5 %, over the threshold): batches wait in the queue at every
	// count, so a noisy rise is not taken for a missing worker, and the
	// job goes down to one. More workers are not tried either while the
	// queue is stocked, though the batch time is far above the converged.
	crawl := scaleModel{worker: 0.100, model: 0.400}
	noisy := runScale(runScale(autoscale.NewState(), m, 40, 16, nil), crawl, 60, 16, []float64{0.05, -0.05, 0.05})
	if noisy.Phase != autoscale.Converged || noisy.Workers != 1 {
		t.Errorf("noisy slow model: %v at %d workers (%s), want converged at 1", noisy.Phase, noisy.Workers, noisy.Reason)
	}
	// The state machine's configuration does not scale down (the mesh
	// cannot take a worker back yet): the job stays at 4 and says why.
	held := autoscale.NewState()
	for i := 0; i < 40; i++ {
		held = autoscale.Step(held, m.metric(held.Workers, 0), unallocatedConfig, 16)
	}
	for i := 0; i < 40; i++ {
		held = autoscale.Step(held, slow.metric(held.Workers, 0), unallocatedConfig, 16)
	}
	if held.Phase != autoscale.Converged || held.Workers != 4 || !strings.Contains(held.Reason, "scaling down is off") {
		t.Errorf("no scale-down: %v at %d workers (%s)", held.Phase, held.Workers, held.Reason)
	}
	// Then the pipeline gets costlier (200 ms of work a batch): the batch
	// time rises well above the converged one, and workers are added up
	// to the 4 that keep up with the model again. (A model that speeds up
	// while the data keeps it waiting leaves the batch time as it was:
	// Cachew's policy does not see that, nor does this one.)
	costly := scaleModel{worker: 0.200, model: 0.050}
	s = runScale(s, costly, 60, 16, nil)
	if s.Phase != autoscale.Converged || s.Workers != 4 {
		t.Errorf("pipeline costlier: %v at %d workers (%s), want converged at 4", s.Phase, s.Workers, s.Reason)
	}

	// A worker dies after convergence: the metrics that straddle its
	// replacement (a spike) are ignored, and the count stays.
	s = runScale(autoscale.NewState(), m, 40, 16, nil)
	s = s.WorkerLost(testScaleConfig)
	s = autoscale.Step(s, autoscale.Metric{BatchTime: 0.5, ResultQueue: 0}, testScaleConfig, 16)
	s = runScale(s, m, 20, 16, nil)
	if s.Phase != autoscale.Converged || s.Workers != 4 {
		t.Errorf("after a worker's death: %v at %d workers (%s)", s.Phase, s.Workers, s.Reason)
	}

	// The mesh shrinks below the count: it follows at once.
	s = autoscale.Step(s, m.metric(4, 0), testScaleConfig, 2)
	if s.Workers != 2 {
		t.Errorf("limit 2: %d workers", s.Workers)
	}
	// Metrics without a batch time change nothing.
	if got := autoscale.Step(autoscale.NewState(), autoscale.Metric{}, testScaleConfig, 8); got != autoscale.NewState() {
		t.Errorf("an empty metric changed the state: %+v", got)
	}
}

func TestAutoscaleConfigValidate(t *testing.T) {
	if err := autoscale.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := autoscale.DefaultConfig()
	bad.Threshold = 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "threshold") {
		t.Errorf("threshold 0: %v", err)
	}
	bad = autoscale.DefaultConfig()
	bad.RevisitEvery = 0
	if err := bad.Validate(); err == nil {
		t.Error("revisit 0 accepted")
	}
}
