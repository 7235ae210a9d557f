package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// warmScaleState is a new job's state when it starts where an earlier
// job of its dataset converged (ScaleStart): st.Workers (at most
// maxWorkers, when set), scaling up, so that its first metric is the base
// the next worker is tried against.
func warmScaleState(st ScaleStart, maxWorkers int) autoscale.State {
	s := autoscale.NewState()
	w := st.Workers
	if maxWorkers > 0 {
		w = min(w, maxWorkers)
	}
	s.Workers = max(w, 1)
	s.Reason = fmt.Sprintf("started at %d workers, where job %q of the same dataset converged; measuring", s.Workers, st.From)
	return s
}

// rememberScale records on j's dataset the count at which j's autoscaling
// has converged (WantedWorkers: one more when it converged for want of a
// node), for the next job of the dataset to start at
// (Dataset.ScaleWorkers).
func (s *State) rememberScale(j *Job) {
	sc := j.Scale
	if sc == nil || sc.Phase != autoscale.Converged {
		return
	}
	w := j.WantedWorkers()
	ds, ok := s.Datasets[j.Fingerprint]
	if !ok || ds.ScaleWorkers == w && ds.ScaleJob == j.Name {
		return
	}
	ds.ScaleWorkers, ds.ScaleJob = w, j.Name
	s.Datasets[j.Fingerprint] = ds
}

// The policy in the state machine: a job with Options.Autoscale steps its
// Scale on its consumers' metrics as their heartbeats bring them (the
// same on every replica: the metric is in the command). One consumer
// speaks for the job, the attached one with the smallest id that reports
// (Cachew has one client per job), and only once per
// BatchesPerMetric batches of it, so that each step sees a fresh window.

// scaleConfig is the policy's configuration in the state machine for a
// job the leader has not allocated yet (autoscale.State.Allocated false: every
// job of a log from before AllocateJob): Cachew's values, fixed so that
// every replica steps alike, without scaling down. scaleConfigAllocated,
// for an allocated job, scales down (the leader dismisses the workers,
// cmd_allocatejob.go), bounds a worker's gain by the consumer's stall
// (StallBound), takes a queue for outpacing only once it settled and grew
// by 4 batches (SettleOnConverge, QueueMin), and measures an added worker
// after one window once it serves (PauseUp).
var (
	scaleConfig = func() autoscale.Config {
		c := autoscale.DefaultConfig()
		c.NoScaleDown = true
		return c
	}()
	scaleConfigAllocated = func() autoscale.Config {
		c := autoscale.DefaultConfig()
		c.StallBound, c.QueueMin, c.SettleOnConverge, c.PauseUp = true, 4, true, 1
		return c
	}()
)

// tuneScale is c with a job's own knobs, where it set them.
func tuneScale(c autoscale.Config, threshold float64, revisit, pause int) autoscale.Config {
	if threshold > 0 {
		c.Threshold = threshold
	}
	if revisit > 0 {
		c.RevisitEvery = revisit
	}
	switch {
	case pause > 0:
		c.PauseMetrics = pause
	case pause < 0:
		c.PauseMetrics = 0
	}
	return c
}

// tuneScale is c with the job's knobs.
func (j *Job) tuneScale(c autoscale.Config) autoscale.Config {
	o := j.Options
	return tuneScale(c, o.AutoscaleThreshold(), o.AutoscaleRevisit(), o.AutoscalePause())
}

// validateScaleTuning checks the job's knobs (CreateJob).
func (o JobOptions) validateScaleTuning() error {
	if o.AutoscaleThreshold == 0 && o.AutoscaleRevisit == 0 && o.AutoscalePause == 0 {
		return nil
	}
	if !o.Autoscale {
		return fmt.Errorf("autoscale threshold, revisit and pause tune an autoscaling job")
	}
	if o.AutoscaleRevisit > jobspec.MaxAutoscaleMetrics || o.AutoscalePause > jobspec.MaxAutoscaleMetrics || o.AutoscalePause < -1 || o.AutoscaleThreshold < 0 {
		return fmt.Errorf("autoscale revisit %d, pause %d, threshold %v: out of range", o.AutoscaleRevisit, o.AutoscalePause, o.AutoscaleThreshold)
	}
	return tuneScale(scaleConfigAllocated, o.AutoscaleThreshold, o.AutoscaleRevisit, o.AutoscalePause).Validate()
}

// stepScale applies consumer's metric m to the job's Scale, if the job
// autoscales, the consumer speaks for it and a window has passed.
func (j *Job) stepScale(consumer string, m autoscale.Metric) {
	if j.Scale == nil {
		return
	}
	for id := range j.ConsumerMetrics {
		if id < consumer {
			return // another consumer speaks for the job
		}
	}
	if j.Scale.Speaker != consumer {
		// A new speaker (the first, or the last one left): its window
		// starts now.
		j.Scale.Speaker, j.Scale.StepBatches = consumer, m.Batches
		return
	}
	if m.Batches < j.Scale.StepBatches+int64(scaleConfig.BatchesPerMetric) {
		return
	}
	cfg := j.tuneScale(scaleConfig)
	if j.Scale.Allocated {
		cfg = j.tuneScale(scaleConfigAllocated)
		if j.awaitWorker(m, cfg) {
			return
		}
	}
	limit := maxJobWorkers
	if mw := j.Options.MaxWorkers(); mw > 0 {
		limit = mw
	}
	before := j.Scale.Workers
	next := autoscale.Step(*j.Scale, m, cfg, limit)
	next.StepBatches = m.Batches
	if next.Workers != before {
		next.Changes++
		next.WantsMore = false
	}
	*j.Scale = next
}

// awaitWorker handles a metric of an allocated job that scales up while
// the worker asked for is not there (not assigned yet, or its batches not
// in the window yet): measuring now would take its absence for no gain.
// If the allocation gives it, it is on its way (being assigned, or a node
// still draining another job's task): wait, and start the pause only once
// it serves (PauseUp). If not, give the allocation the pause to catch up;
// then (no free node) converge at what the job has; it wants one more,
// and the mesh says so (WantedWorkers). It reports whether it took the
// metric.
func (j *Job) awaitWorker(m autoscale.Metric, cfg autoscale.Config) bool {
	active := j.ActiveWorkers()
	missing := active < j.Scale.Workers || m.Workers > 0 && m.Workers < j.Scale.Workers
	if j.Scale.Phase != autoscale.Up || !missing {
		return false
	}
	j.Scale.StepBatches = m.Batches
	switch {
	case active >= j.Scale.Workers:
		j.Scale.Reason = fmt.Sprintf("waiting for worker %d's batches to reach the consumer (from %d workers in the last window)", j.Scale.Workers, m.Workers)
	case j.Scale.Allotted >= j.Scale.Workers:
		j.Scale.Reason = fmt.Sprintf("waiting for worker %d (has %d): its node is on its way", j.Scale.Workers, active)
	case j.Scale.Pause > 0:
		j.Scale.Pause--
	default:
		j.Scale.Converge(max(active, 1), j.Scale.Base, cfg, fmt.Sprintf("the allocation gives %d nodes (%s): converged at %d, one more wanted",
			j.Scale.Allotted, j.Scale.Allocation, max(active, 1)))
		j.Scale.WantsMore = true
		j.Scale.Changes++
	}
	return true
}

// ScaledLimit is how many live workers the job may have: its Scale's
// count when it autoscales (at least 1), else MaxWorkers (0: no limit).
func (j *Job) ScaledLimit() int {
	if j.Scale != nil {
		w := max(j.Scale.Workers, 1)
		if mw := j.Options.MaxWorkers(); mw > 0 {
			w = min(w, mw)
		}
		return w
	}
	return j.Options.MaxWorkers()
}

// WantedWorkers is how many workers an autoscaling job's policy wants
// now (Scale.Workers capped by MaxWorkers, at least 1; a job waiting for a
// node the mesh does not have counts it); 0 for a job that does not
// autoscale.
func (j *Job) WantedWorkers() int {
	if j.Scale == nil {
		return 0
	}
	w := max(j.ScaledLimit(), 1)
	if mw := j.Options.MaxWorkers(); j.Scale.WantsMore && (mw == 0 || w < mw) {
		w++
	}
	return w
}
