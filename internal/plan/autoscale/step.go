package autoscale

import (
	"fmt"
)

// Step applies one metric to s and returns the new state. limit is the
// most workers the job may have now (in the state machine: the job's
// max_workers, or MaxWorkers, since it does not know the mesh's nodes; a
// count above the nodes brings no gain and converges): the count
// never exceeds it, and a limit below the count lowers it at once. A
// metric with no batch time is ignored.
func Step(s State, m Metric, cfg Config, limit int) State {
	limit = max(limit, 1)
	if s.Workers > limit {
		s.changed(limit, cfg, fmt.Sprintf("the mesh has %d workers for the job", limit))
		if s.Phase == Up {
			s.Phase, s.ConvergedQueue = Converged, -1
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
	case Up:
		s.stepUp(m, cfg, limit, fed)
	case Converged:
		s.stepConverged(m, cfg, limit, fed)
	case Down:
		s.stepDown(m, cfg)
	}
	return s
}

// stepUp judges the worker added last: it stays, and another is tried,
// while each brings more than Threshold.
func (s *State) stepUp(m Metric, cfg Config, limit int, fed bool) {
	switch {
	case s.Base == 0 && fed:
		s.Base = m.BatchTime
		s.Converge(s.Workers, m.BatchTime, cfg, fmt.Sprintf("the consumer waits %.1f %% of its time with %d workers: no worker can improve its batch time by %.0f %%",
			100*m.Stall, s.Workers, 100*cfg.Threshold))
	case s.Base == 0:
		s.Base = m.BatchTime
		if s.Workers < limit {
			s.changed(s.Workers+1, cfg, fmt.Sprintf("batch time %s with %d workers: trying %d", ms(m.BatchTime), s.Workers, s.Workers+1))
		} else {
			s.Converge(s.Workers, m.BatchTime, cfg, fmt.Sprintf("at the limit of %d workers", limit))
		}
	case gain(s.Base, m.BatchTime) > cfg.Threshold:
		why := fmt.Sprintf("worker %d improved batch time %s → %s (%.1f %%)", s.Workers, ms(s.Base), ms(m.BatchTime), 100*gain(s.Base, m.BatchTime))
		s.Base = m.BatchTime
		switch {
		case fed:
			s.Converge(s.Workers, m.BatchTime, cfg, why+fmt.Sprintf("; the consumer now waits %.1f %% of its time: converged at %d", 100*m.Stall, s.Workers))
		case s.Workers < limit:
			s.changed(s.Workers+1, cfg, why+fmt.Sprintf(": trying %d", s.Workers+1))
		default:
			s.Converge(s.Workers, m.BatchTime, cfg, why+fmt.Sprintf("; at the limit of %d workers", limit))
		}
	default:
		s.Converge(s.Workers-1, s.Base, cfg, fmt.Sprintf("worker %d improved batch time by %.1f %% only (threshold %.0f %%): converged at %d",
			s.Workers, max(100*gain(s.Base, m.BatchTime), 0), 100*cfg.Threshold, s.Workers-1))
	}
}

// stepConverged revisits a converged decision every RevisitEvery metrics:
// the queue first (workers outpacing the model: one fewer), then the
// batch time (one more).
func (s *State) stepConverged(m Metric, cfg Config, limit int, fed bool) {
	if s.ConvergedQueue < 0 {
		s.ConvergedQueue = m.ResultQueue // the first metric at the converged count
		return
	}
	s.SinceRevisit++
	if s.SinceRevisit < cfg.RevisitEvery {
		return
	}
	s.SinceRevisit = 0
	outpaced := cfg.outpaced(m.ResultQueue, s.ConvergedQueue)
	switch {
	case outpaced && s.Workers > 1:
		if cfg.NoScaleDown {
			s.Reason = fmt.Sprintf("result queue %.1f is above the converged %.1f (workers outpace the model): fewer would do, but scaling down is off; keeping %d",
				m.ResultQueue, s.ConvergedQueue, s.Workers)
			return
		}
		s.Phase, s.Base, s.BaseQueue = Down, m.BatchTime, m.ResultQueue
		s.changed(s.Workers-1, cfg, fmt.Sprintf("result queue %.1f is %.0f %% above the converged %.1f (workers outpace the model): trying %d",
			m.ResultQueue, 100*(m.ResultQueue/max(s.ConvergedQueue, 1e-9)-1), s.ConvergedQueue, s.Workers-1))
	case m.BatchTime > s.ConvergedBatchTime*(1+cfg.UpRatio) && s.Workers < limit && !outpaced && !fed:
		// (With batches waiting in the queue, or a consumer that
		// hardly waits, the model is slower than the workers:
		// another worker would not help.)
		s.Phase, s.Base = Up, m.BatchTime
		s.changed(s.Workers+1, cfg, fmt.Sprintf("batch time %s is %.0f %% above the converged %s: trying %d",
			ms(m.BatchTime), 100*(m.BatchTime/s.ConvergedBatchTime-1), ms(s.ConvergedBatchTime), s.Workers+1))
	}
}

// stepDown judges the worker removed last: the removals go on while the
// batch time holds and the queue does not drain.
func (s *State) stepDown(m Metric, cfg Config) {
	// A batch time that rose while batches still wait in the queue
	// is the model's own (noise, or it slowed further), not the
	// missing worker's: the scale-down goes on.
	stocked := cfg.outpaced(m.ResultQueue, s.ConvergedQueue)
	if cfg.QueueMin > 0 && m.ResultQueue <= s.BaseQueue-cfg.QueueMin {
		// The queue drained: the consumer was fed from it, and the
		// workers left fall behind (before they dry it up).
		s.Converge(s.Workers+1, s.Base, cfg, fmt.Sprintf("with %d workers the result queue drains (%.1f → %.1f): back to %d", s.Workers, s.BaseQueue, m.ResultQueue, s.Workers+1))
		s.ConvergedQueue = s.BaseQueue
		return
	}
	if -gain(s.Base, m.BatchTime) >= cfg.Threshold && !stocked {
		s.Converge(s.Workers+1, s.Base, cfg, fmt.Sprintf("with %d workers batch time rose %.1f %%: back to %d", s.Workers, -100*gain(s.Base, m.BatchTime), s.Workers+1))
		if cfg.QueueMin > 0 {
			s.ConvergedQueue = s.BaseQueue
		}
		return
	}
	if s.Workers == 1 {
		s.Converge(1, m.BatchTime, cfg, "one worker is enough")
		return
	}
	s.Base, s.BaseQueue = m.BatchTime, m.ResultQueue
	s.changed(s.Workers-1, cfg, fmt.Sprintf("%d workers keep the batch time (%s): trying %d", s.Workers, ms(m.BatchTime), s.Workers-1))
}

// gain is the relative improvement from before to after (negative when
// after is slower).
func gain(before, after float64) float64 { return (before - after) / before }

func ms(seconds float64) string { return fmt.Sprintf("%.3g ms", 1e3*seconds) }
