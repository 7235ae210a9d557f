package raftstate

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Autoscaling after Cachew (Graur et al., ATC'22, §4.3), decided purely:
// StepAutoscale turns one job's stream of consumer metrics into the number
// of workers the job should have, and AllocateWorkers turns every job's
// number into nodes. The mesh gathers the metrics (the consumers' batch
// time and result-queue fill, in their heartbeats), records the decisions
// through Raft and applies them; nothing here reads a clock or the
// network.
//
// The policy: a job starts on one worker. Each metric is the consumers'
// batch time (seconds per batch, over the last BatchesPerMetric batches).
// After a worker is added, the batch time must improve by more than
// Threshold for the worker to stay and another to be tried; the first
// worker that does not improve it is taken back and the decision
// converges. A converged job is revisited every RevisitEvery metrics: a
// batch time more than UpRatio above the converged one adds a worker and
// scales up again; a result queue more than DownQueueRatio above the
// converged one (workers outpacing the model) removes a worker and scales
// down while the batch time grows by less than Threshold. The queue is
// checked first: when the model slows down, the batch time rises too, but
// more workers would only grow the queue. After each
// change the next PauseMetrics metrics are ignored: they straddle the
// change.

// AutoscaleConfig are the policy's knobs; DefaultAutoscaleConfig has
// Cachew's values.
type AutoscaleConfig struct {
	// Threshold is the relative batch-time improvement a new worker must
	// bring to stay (Cachew: 3 %), and the relative increase that stops a
	// scale-down.
	Threshold float64
	// RevisitEvery is how many metrics a converged decision stands before
	// it is revisited (Cachew: 10).
	RevisitEvery int
	// UpRatio: at a revisit, a batch time more than this much above the
	// converged one adds a worker (Cachew: "significantly higher").
	UpRatio float64
	// DownQueueRatio: at a revisit, a result queue more than this much
	// above the converged one removes a worker (Cachew: 40 %).
	DownQueueRatio float64
	// PauseMetrics is how many metrics are ignored after each change
	// (Cachew pauses collection for 150 batches: 2 metrics of 100).
	PauseMetrics int
	// PauseUp, if above 0, is how many metrics are ignored after a worker
	// is added instead of PauseMetrics, counted from when the worker
	// serves (the state machine waits for it first, Job.stepScale): the
	// window in which it joins straddles its start-up, the next one
	// measures it. 0 is PauseMetrics, counted from the change.
	PauseUp int
	// QueueMin is the least growth of the result queue, in batches, that
	// counts as the workers outpacing the model (besides DownQueueRatio):
	// the queue of a job at its plateau fills towards the consumer's
	// prefetch bound and wavers by a few batches, which must not set off
	// a scale-down. 0 is 1 batch. Above 0, it is also the fall of the
	// queue during a scale-down that takes the worker back (BaseQueue).
	QueueMin float64
	// SettleOnConverge also ignores the PauseMetrics metrics after a
	// decision converges where the job already is (as the StallBound
	// does): the result queue is still filling then, and the converged
	// queue it is compared with at each revisit is taken once it settled.
	SettleOnConverge bool
	// BatchesPerMetric is how many batches one metric averages over
	// (Cachew: 100); the consumers use it.
	BatchesPerMetric int
	// StallBound stops adding workers while the consumer hardly waits:
	// the batch time is the wait for data plus the loop's own work, and
	// more workers shorten only the wait, so a window in which the
	// consumer waited less than Threshold of its time (ScaleMetric.Stall)
	// proves that no worker can bring the gain Threshold asks for. Such a
	// job converges where it is instead of trying one more worker (a try
	// costs 1 + PauseMetrics windows, and on a loaded machine the noise of
	// a window can pass for the gain). Metrics without a stall (Batches
	// 0: a client that does not report it) are judged on batch time alone.
	StallBound bool
	// NoScaleDown keeps a converged job where it is when its queue says
	// fewer workers would do (the decision's reason says so) instead of
	// scaling down: for a mesh that cannot take workers back from a job.
	NoScaleDown bool
}

// DefaultAutoscaleConfig returns Cachew's values (UpRatio, which the paper
// leaves as "significantly higher", is 10 %).
func DefaultAutoscaleConfig() AutoscaleConfig {
	return AutoscaleConfig{Threshold: 0.03, RevisitEvery: 10, UpRatio: 0.10, DownQueueRatio: 0.40, PauseMetrics: 2, BatchesPerMetric: 100}
}

// Validate rejects knobs the policy cannot work with.
func (c AutoscaleConfig) Validate() error {
	switch {
	case !(c.Threshold > 0 && c.Threshold < 1):
		return fmt.Errorf("autoscale threshold %v: want in (0, 1)", c.Threshold)
	case c.RevisitEvery < 1:
		return fmt.Errorf("autoscale revisit interval %d metrics: want >= 1", c.RevisitEvery)
	case !(c.UpRatio > 0), !(c.DownQueueRatio > 0):
		return fmt.Errorf("autoscale up ratio %v, down queue ratio %v: want > 0", c.UpRatio, c.DownQueueRatio)
	case c.PauseMetrics < 0, c.PauseUp < 0:
		return fmt.Errorf("autoscale pause %d metrics (%d after adding a worker): want >= 0", c.PauseMetrics, c.PauseUp)
	case !(c.QueueMin >= 0) || math.IsInf(c.QueueMin, 0):
		return fmt.Errorf("autoscale least queue growth %v batches: want a finite number >= 0", c.QueueMin)
	case c.BatchesPerMetric < 1:
		return fmt.Errorf("autoscale batches per metric %d: want >= 1", c.BatchesPerMetric)
	}
	return nil
}

// ScaleMetric is one report of a job's consumer (its heartbeat carries
// it; the job keeps each consumer's last, Job.ConsumerMetrics).
type ScaleMetric struct {
	// BatchTime is the time to get and process a batch, averaged over the
	// last BatchesPerMetric batches (seconds).
	BatchTime float64 `cbor:"1,keyasint" json:"batch_time"`
	// ResultQueue is the batches buffered in the consumers, waiting for
	// the model (averaged over the same batches).
	ResultQueue float64 `cbor:"2,keyasint" json:"result_queue"`
	// Stall is the share of the training loop's time spent waiting for
	// data over the same batches; Batches the batches the consumer has
	// received in all.
	Stall   float64 `cbor:"3,keyasint,omitempty" json:"stall"`
	Batches int64   `cbor:"4,keyasint,omitempty" json:"batches"`
	// Workers is how many workers delivered the window's batches (0:
	// not reported).
	Workers int `cbor:"5,keyasint,omitempty" json:"workers,omitempty"`
}

// Validate rejects a metric no consumer can have measured.
func (m ScaleMetric) Validate() error {
	ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
	if !ok(m.BatchTime) || !ok(m.ResultQueue) || !ok(m.Stall) || m.Stall > 1 || m.Batches < 0 || m.Workers < 0 || m.Workers > MaxJobWorkers {
		return fmt.Errorf("consumer metric %+v: want finite batch time, queue and batches >= 0, a stall in [0, 1] and workers in [0, %d]", m, MaxJobWorkers)
	}
	return nil
}

// ScalePhase is where a job is in the policy.
type ScalePhase uint8

// The phases.
const (
	ScaleUp        ScalePhase = iota // adding workers while they help
	ScaleConverged                   // holding, revisited now and then
	ScaleDown                        // removing workers while they are not missed
)

func (p ScalePhase) String() string {
	switch p {
	case ScaleUp:
		return "scaling up"
	case ScaleConverged:
		return "converged"
	case ScaleDown:
		return "scaling down"
	}
	return fmt.Sprintf("phase %d", uint8(p))
}

// ScaleState is one job's autoscaling state. The zero value is not
// valid: start from NewScaleState.
type ScaleState struct {
	Phase ScalePhase `cbor:"1,keyasint" json:"phase"`
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
	// Allocated: the leader allocates the job's nodes (AllocateJob,
	// release.go) and can take workers back, so the policy scales down
	// (scaleConfigAllocated) and waits for a worker it asked for before
	// measuring it. Jobs of a log from before AllocateJob never set it
	// and replay as they did.
	Allocated bool `cbor:"12,keyasint,omitempty" json:"allocated,omitempty"`
	// Share is how many nodes the last allocation gave the job, and
	// Allocation why (its own nodes, or a fair share of how many).
	Share      int    `cbor:"13,keyasint,omitempty" json:"share,omitempty"`
	Allocation string `cbor:"14,keyasint,omitempty" json:"allocation,omitempty"`
	// WantsMore: the policy converged because the allocation could not
	// give the worker it asked for (no free node): the job would take
	// one more (WantedWorkers counts it) and tries again at a revisit.
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

// NewScaleState is a new job's state: one worker, scaling up.
func NewScaleState() ScaleState {
	return ScaleState{Phase: ScaleUp, Workers: 1, ConvergedQueue: -1, Reason: "new job: one worker, measuring"}
}

// warmScaleState is a new job's state when it starts where an earlier
// job of its dataset converged (ScaleStart): st.Workers (at most
// maxWorkers, when set), scaling up, so that its first metric is the base
// the next worker is tried against.
func warmScaleState(st ScaleStart, maxWorkers int) ScaleState {
	s := NewScaleState()
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
	if sc == nil || sc.Phase != ScaleConverged {
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

// changed records a change of the worker count to w.
func (s *ScaleState) changed(w int, cfg AutoscaleConfig, reason string) {
	s.Pause = cfg.PauseMetrics
	if w > s.Workers && cfg.PauseUp > 0 {
		s.Pause = cfg.PauseUp
	}
	s.Workers, s.Reason = w, reason
}

// converge holds at w workers.
func (s *ScaleState) converge(w int, batchTime float64, cfg AutoscaleConfig, reason string) {
	if w != s.Workers {
		s.changed(w, cfg, reason)
	} else {
		s.Reason = reason
		if cfg.SettleOnConverge {
			s.Pause = cfg.PauseMetrics
		}
	}
	s.Phase, s.ConvergedBatchTime, s.ConvergedQueue, s.SinceRevisit = ScaleConverged, batchTime, -1, 0
}

// WorkerLost tells the policy that one of the job's workers died or left:
// the next metrics straddle the replacement, so they are ignored as after
// a change of its own.
func (s ScaleState) WorkerLost(cfg AutoscaleConfig) ScaleState {
	s.Pause = cfg.PauseMetrics
	return s
}

// StepAutoscale applies one metric to s and returns the new state. limit
// is the most workers the job may have now (in the state machine: the
// job's MaxWorkers, or MaxJobWorkers, since it does not know the mesh's
// nodes; a count above the nodes brings no gain and converges): the count
// never exceeds it, and a limit below the count lowers it at once. A
// metric with no batch time is ignored.
func StepAutoscale(s ScaleState, m ScaleMetric, cfg AutoscaleConfig, limit int) ScaleState {
	limit = max(limit, 1)
	if s.Workers > limit {
		s.changed(limit, cfg, fmt.Sprintf("the mesh has %d workers for the job", limit))
		if s.Phase == ScaleUp {
			s.Phase, s.ConvergedQueue = ScaleConverged, -1
		}
		return s
	}
	if !(m.BatchTime > 0) || m.ResultQueue < 0 {
		return s
	}
	if s.Pause > 0 {
		s.Pause--
		return s
	}
	// fed: the consumer hardly waits for data, so another worker cannot
	// improve its batch time by Threshold (StallBound).
	fed := cfg.StallBound && m.Batches > 0 && m.Stall < cfg.Threshold
	switch s.Phase {
	case ScaleUp:
		switch {
		case s.Base == 0 && fed:
			s.Base = m.BatchTime
			s.converge(s.Workers, m.BatchTime, cfg, fmt.Sprintf("the consumer waits %.1f %% of its time with %d workers: no worker can improve its batch time by %.0f %%",
				100*m.Stall, s.Workers, 100*cfg.Threshold))
		case s.Base == 0:
			s.Base = m.BatchTime
			if s.Workers < limit {
				s.changed(s.Workers+1, cfg, fmt.Sprintf("batch time %s with %d workers: trying %d", ms(m.BatchTime), s.Workers, s.Workers+1))
			} else {
				s.converge(s.Workers, m.BatchTime, cfg, fmt.Sprintf("at the limit of %d workers", limit))
			}
		case gain(s.Base, m.BatchTime) > cfg.Threshold:
			why := fmt.Sprintf("worker %d improved batch time %s → %s (%.1f %%)", s.Workers, ms(s.Base), ms(m.BatchTime), 100*gain(s.Base, m.BatchTime))
			s.Base = m.BatchTime
			switch {
			case fed:
				s.converge(s.Workers, m.BatchTime, cfg, why+fmt.Sprintf("; the consumer now waits %.1f %% of its time: converged at %d", 100*m.Stall, s.Workers))
			case s.Workers < limit:
				s.changed(s.Workers+1, cfg, why+fmt.Sprintf(": trying %d", s.Workers+1))
			default:
				s.converge(s.Workers, m.BatchTime, cfg, why+fmt.Sprintf("; at the limit of %d workers", limit))
			}
		default:
			s.converge(s.Workers-1, s.Base, cfg, fmt.Sprintf("worker %d improved batch time by %.1f %% only (threshold %.0f %%): converged at %d",
				s.Workers, max(100*gain(s.Base, m.BatchTime), 0), 100*cfg.Threshold, s.Workers-1))
		}
	case ScaleConverged:
		if s.ConvergedQueue < 0 {
			s.ConvergedQueue = m.ResultQueue // the first metric at the converged count
			return s
		}
		s.SinceRevisit++
		if s.SinceRevisit < cfg.RevisitEvery {
			return s
		}
		s.SinceRevisit = 0
		outpaced := cfg.outpaced(m.ResultQueue, s.ConvergedQueue)
		switch {
		case outpaced && s.Workers > 1:
			if cfg.NoScaleDown {
				s.Reason = fmt.Sprintf("result queue %.1f is above the converged %.1f (workers outpace the model): fewer would do, but scaling down is off; keeping %d",
					m.ResultQueue, s.ConvergedQueue, s.Workers)
				return s
			}
			s.Phase, s.Base, s.BaseQueue = ScaleDown, m.BatchTime, m.ResultQueue
			s.changed(s.Workers-1, cfg, fmt.Sprintf("result queue %.1f is %.0f %% above the converged %.1f (workers outpace the model): trying %d",
				m.ResultQueue, 100*(m.ResultQueue/max(s.ConvergedQueue, 1e-9)-1), s.ConvergedQueue, s.Workers-1))
		case m.BatchTime > s.ConvergedBatchTime*(1+cfg.UpRatio) && s.Workers < limit && !outpaced && !fed:
			// (With batches waiting in the queue, or a consumer that
			// hardly waits, the model is slower than the workers:
			// another worker would not help.)
			s.Phase, s.Base = ScaleUp, m.BatchTime
			s.changed(s.Workers+1, cfg, fmt.Sprintf("batch time %s is %.0f %% above the converged %s: trying %d",
				ms(m.BatchTime), 100*(m.BatchTime/s.ConvergedBatchTime-1), ms(s.ConvergedBatchTime), s.Workers+1))
		}
	case ScaleDown:
		// A batch time that rose while batches still wait in the queue
		// is the model's own (noise, or it slowed further), not the
		// missing worker's: the scale-down goes on.
		stocked := cfg.outpaced(m.ResultQueue, s.ConvergedQueue)
		if cfg.QueueMin > 0 && m.ResultQueue <= s.BaseQueue-cfg.QueueMin {
			// The queue drained: the consumer was fed from it, and the
			// workers left fall behind (before they dry it up).
			s.converge(s.Workers+1, s.Base, cfg, fmt.Sprintf("with %d workers the result queue drains (%.1f → %.1f): back to %d", s.Workers, s.BaseQueue, m.ResultQueue, s.Workers+1))
			s.ConvergedQueue = s.BaseQueue
			return s
		}
		if -gain(s.Base, m.BatchTime) >= cfg.Threshold && !stocked {
			s.converge(s.Workers+1, s.Base, cfg, fmt.Sprintf("with %d workers batch time rose %.1f %%: back to %d", s.Workers, -100*gain(s.Base, m.BatchTime), s.Workers+1))
			if cfg.QueueMin > 0 {
				s.ConvergedQueue = s.BaseQueue
			}
			return s
		}
		if s.Workers == 1 {
			s.converge(1, m.BatchTime, cfg, "one worker is enough")
			return s
		}
		s.Base, s.BaseQueue = m.BatchTime, m.ResultQueue
		s.changed(s.Workers-1, cfg, fmt.Sprintf("%d workers keep the batch time (%s): trying %d", s.Workers, ms(m.BatchTime), s.Workers-1))
	}
	return s
}

// outpaced reports whether a result queue of q batches is well above the
// converged one: by DownQueueRatio, and by QueueMin batches (at least 1).
func (c AutoscaleConfig) outpaced(q, converged float64) bool {
	return q > converged*(1+c.DownQueueRatio) && q-converged >= max(c.QueueMin, 1)
}

// gain is the relative improvement from before to after (negative when
// after is slower).
func gain(before, after float64) float64 { return (before - after) / before }

func ms(seconds float64) string { return fmt.Sprintf("%.3g ms", 1e3*seconds) }

// AllocateWorkers assigns worker nodes to jobs: want is each job's worker
// count (StepAutoscale's), nodes the live worker nodes, current each job's
// nodes now. It keeps current assignments where it can (a node moves only
// when its job wants fewer, or another job's fair share needs it).
//
// While the jobs want no more nodes than there are, each node serves at
// most one job and each job gets what it wants. When they want more, the
// nodes are shared out max-min fairly (water-filling: no job gets more
// than it wants, and no job gets more than another that wants more) and
// still each node serves one job; only when there are more jobs than nodes
// does a node serve several, every job then getting one node, the least
// loaded. A job that wants 0 gets none. Jobs are returned sorted, each
// with its nodes sorted.
func AllocateWorkers(want map[string]int, nodes []string, current map[string][]string) map[string][]string {
	jobs := slices.Sorted(maps.Keys(want))
	live := slices.Sorted(slices.Values(nodes))
	live = slices.Compact(live)
	out := make(map[string][]string, len(jobs))
	if len(live) == 0 {
		for _, j := range jobs {
			out[j] = nil
		}
		return out
	}
	var active []string
	for _, j := range jobs {
		if want[j] > 0 {
			active = append(active, j)
		} else {
			out[j] = nil
		}
	}
	if len(active) > len(live) {
		// Fewer nodes than jobs: one node each, nodes shared, the least
		// loaded first (a job keeps a current node if it has one).
		load := map[string]int{}
		for _, j := range active {
			if n := firstLive(current[j], live); n != "" {
				out[j] = []string{n}
				load[n]++
			}
		}
		for _, j := range active {
			if out[j] != nil {
				continue
			}
			best := live[0]
			for _, n := range live {
				if load[n] < load[best] {
					best = n
				}
			}
			out[j] = []string{best}
			load[best]++
		}
		return out
	}
	share := waterFill(active, want, len(live))
	used := map[string]bool{}
	for _, j := range active {
		var keep []string
		for _, n := range slices.Sorted(slices.Values(current[j])) {
			if len(keep) < share[j] && slices.Contains(live, n) && !used[n] {
				keep = append(keep, n)
				used[n] = true
			}
		}
		out[j] = keep
	}
	for _, j := range active {
		for _, n := range live {
			if len(out[j]) >= share[j] {
				break
			}
			if !used[n] {
				out[j] = append(out[j], n)
				used[n] = true
			}
		}
		slices.Sort(out[j])
	}
	return out
}

// waterFill shares n nodes among jobs max-min fairly, each at least 1 and
// at most what it wants (len(jobs) <= n).
func waterFill(jobs []string, want map[string]int, n int) map[string]int {
	share := make(map[string]int, len(jobs))
	left := n
	open := slices.Clone(jobs)
	for len(open) > 0 && left > 0 {
		level := max(left/len(open), 1)
		var still []string
		for _, j := range open {
			give := min(want[j]-share[j], level, left)
			share[j] += give
			left -= give
			if share[j] < want[j] {
				still = append(still, j)
			}
		}
		open = still // each round gives at least one node while any is left
	}
	return share
}

func firstLive(ns []string, live []string) string {
	for _, n := range slices.Sorted(slices.Values(ns)) {
		if slices.Contains(live, n) {
			return n
		}
	}
	return ""
}

// The policy in the state machine: a job with Options.Autoscale steps its
// Scale on its consumers' metrics as their heartbeats bring them (the
// same on every replica: the metric is in the command). One consumer
// speaks for the job, the attached one with the smallest id that reports
// (Cachew has one client per job), and only once per
// BatchesPerMetric batches of it, so that each step sees a fresh window.

// scaleConfig is the policy's configuration in the state machine for a
// job the leader has not allocated yet (ScaleState.Allocated false: every
// job of a log from before AllocateJob): Cachew's values, fixed so that
// every replica steps alike, without scaling down. scaleConfigAllocated,
// for an allocated job, scales down (the leader releases the workers,
// release.go), bounds a worker's gain by the consumer's stall
// (StallBound), takes a queue for outpacing only once it settled and grew
// by 4 batches (SettleOnConverge, QueueMin), and measures an added worker
// after one window once it serves (PauseUp).
var (
	scaleConfig = func() AutoscaleConfig {
		c := DefaultAutoscaleConfig()
		c.NoScaleDown = true
		return c
	}()
	scaleConfigAllocated = func() AutoscaleConfig {
		c := DefaultAutoscaleConfig()
		c.StallBound, c.QueueMin, c.SettleOnConverge, c.PauseUp = true, 4, true, 1
		return c
	}()
)

// tuneScale is c with the job's own knobs, where it set them.
func (o JobOptions) tuneScale(c AutoscaleConfig) AutoscaleConfig {
	if o.AutoscaleThreshold > 0 {
		c.Threshold = o.AutoscaleThreshold
	}
	if o.AutoscaleRevisit > 0 {
		c.RevisitEvery = o.AutoscaleRevisit
	}
	switch {
	case o.AutoscalePause > 0:
		c.PauseMetrics = o.AutoscalePause
	case o.AutoscalePause < 0:
		c.PauseMetrics = 0
	}
	return c
}

// validateScaleTuning checks the job's knobs (CreateJob).
func (o JobOptions) validateScaleTuning() error {
	if o.AutoscaleThreshold == 0 && o.AutoscaleRevisit == 0 && o.AutoscalePause == 0 {
		return nil
	}
	if !o.Autoscale {
		return fmt.Errorf("autoscale threshold, revisit and pause tune an autoscaling job")
	}
	if o.AutoscaleRevisit > maxScaleMetrics || o.AutoscalePause > maxScaleMetrics || o.AutoscalePause < -1 || o.AutoscaleThreshold < 0 {
		return fmt.Errorf("autoscale revisit %d, pause %d, threshold %v: out of range", o.AutoscaleRevisit, o.AutoscalePause, o.AutoscaleThreshold)
	}
	return o.tuneScale(scaleConfigAllocated).Validate()
}

// maxScaleMetrics bounds the revisit interval and the pause.
const maxScaleMetrics = 1000

// stepScale applies consumer's metric m to the job's Scale, if the job
// autoscales, the consumer speaks for it and a window has passed.
func (j *Job) stepScale(consumer string, m ScaleMetric) {
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
	cfg := j.Options.tuneScale(scaleConfig)
	if j.Scale.Allocated {
		cfg = j.Options.tuneScale(scaleConfigAllocated)
		if active := j.activeWorkers(); j.Scale.Phase == ScaleUp && (active < j.Scale.Workers || m.Workers > 0 && m.Workers < j.Scale.Workers) {
			// The worker asked for is not there: measuring now would
			// take its absence for no gain. If the allocation gives it,
			// it is on its way (being assigned, or a node still draining
			// another job's task): wait, and start the pause only once
			// it serves (PauseUp). If not, give the allocation the pause
			// to catch up; then (no free node) converge at what the job
			// has; it wants one more, and the mesh says so
			// (WantedWorkers).
			j.Scale.StepBatches = m.Batches
			if active >= j.Scale.Workers {
				j.Scale.Reason = fmt.Sprintf("waiting for worker %d's batches to reach the consumer (from %d workers in the last window)", j.Scale.Workers, m.Workers)
				return
			}
			if j.Scale.Share >= j.Scale.Workers {
				j.Scale.Reason = fmt.Sprintf("waiting for worker %d (has %d): its node is on its way", j.Scale.Workers, active)
				return
			}
			if j.Scale.Pause > 0 {
				j.Scale.Pause--
				return
			}
			j.Scale.converge(max(active, 1), j.Scale.Base, cfg, fmt.Sprintf("the allocation gives %d nodes (%s): converged at %d, one more wanted",
				j.Scale.Share, j.Scale.Allocation, max(active, 1)))
			j.Scale.WantsMore = true
			j.Scale.Changes++
			return
		}
	}
	limit := MaxJobWorkers
	if j.Options.MaxWorkers > 0 {
		limit = j.Options.MaxWorkers
	}
	before := j.Scale.Workers
	next := StepAutoscale(*j.Scale, m, cfg, limit)
	next.StepBatches = m.Batches
	if next.Workers != before {
		next.Changes++
		next.WantsMore = false
	}
	*j.Scale = next
}

// scaledLimit is how many live workers the job may have: its Scale's
// count when it autoscales (at least 1), else MaxWorkers (0: no limit).
func (j *Job) scaledLimit() int {
	if j.Scale != nil {
		w := max(j.Scale.Workers, 1)
		if mw := j.Options.MaxWorkers; mw > 0 {
			w = min(w, mw)
		}
		return w
	}
	return j.Options.MaxWorkers
}
