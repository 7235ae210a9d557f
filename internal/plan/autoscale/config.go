package autoscale

import (
	"fmt"
	"math"
)

// MaxWorkers bounds the worker counts the policy is told of (a metric's
// Workers). It is the most workers a job may ever have, which the state
// machine's bound on a job's workers is.
const MaxWorkers = 4096

// Config are the policy's knobs; DefaultConfig has Cachew's values.
type Config struct {
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
	// serves (the state machine waits for it first, fsm's stepScale): the
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
	// consumer waited less than Threshold of its time (Metric.Stall)
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

// DefaultConfig returns Cachew's values (UpRatio, which the paper
// leaves as "significantly higher", is 10 %).
func DefaultConfig() Config {
	return Config{Threshold: 0.03, RevisitEvery: 10, UpRatio: 0.10, DownQueueRatio: 0.40, PauseMetrics: 2, BatchesPerMetric: 100}
}

// Validate rejects knobs the policy cannot work with.
func (c Config) Validate() error {
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

// outpaced reports whether a result queue of q batches is well above the
// converged one: by DownQueueRatio, and by QueueMin batches (at least 1).
func (c Config) outpaced(q, converged float64) bool {
	return q > converged*(1+c.DownQueueRatio) && q-converged >= max(c.QueueMin, 1)
}
