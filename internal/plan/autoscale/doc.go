// Package autoscale is the autoscaling policy after Cachew (Graur et al.,
// ATC'22, §4.3), decided purely: Step turns one job's stream of consumer
// metrics into the number of workers the job should have. Nothing here
// reads a clock or the network, and nothing here knows of jobs or Raft:
// the state machine (internal/fsm) keeps each autoscaling job's State in
// the replicated state and steps it on the metrics its consumers'
// heartbeats carry, the same on every replica, and the leader's planner
// (internal/plan) turns every job's count into nodes.
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
// more workers would only grow the queue. After each change the next
// PauseMetrics metrics are ignored: they straddle the change.
//
// State is part of the replicated state's snapshot: its CBOR keys are
// part of the snapshot format, and Step must decide alike on every
// replica and every version that replays the same log.
package autoscale
