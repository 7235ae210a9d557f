package raftstate

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// Bodies of the job commands, version 1. Field numbers are part of the log
// format.

// RegisterDatasetBody is the body of TypeRegisterDataset.
type RegisterDatasetBody struct {
	Dataset Dataset `cbor:"1,keyasint"`
}

// CreateJobBody is the body of TypeCreateJob.
type CreateJobBody struct {
	Name          string     `cbor:"1,keyasint"`
	Fingerprint   string     `cbor:"2,keyasint"`
	Options       JobOptions `cbor:"3,keyasint"`
	StaticWorkers []string   `cbor:"4,keyasint,omitempty"`
	// Resume (exactly-once DYNAMIC only) creates the job to resume from a
	// consumer's checkpoint, or adds one to a job that waits for them.
	Resume *ResumeBody `cbor:"5,keyasint,omitempty"`
	// Scale (CreateJob v3, autoscaling jobs only) starts a new job at
	// more than one worker (NewCreateJobAt).
	Scale *ScaleStart `cbor:"6,keyasint,omitempty"`
}

// ScaleStart is where a new autoscaling job starts: at Workers, the count
// at which job From of its dataset converged (Dataset.ScaleWorkers). The
// proposer reads it from its state and puts it in the command, so every
// replica starts the job alike.
type ScaleStart struct {
	Workers int    `cbor:"1,keyasint"`
	From    string `cbor:"2,keyasint"`
}

// ResumeBody is one consumer's checkpoint (CreateJobBody.Resume).
type ResumeBody struct {
	// From is the ID of the job the checkpoint was taken of.
	From uint64 `cbor:"1,keyasint"`
	// Part is the consumer (of job From) that took it.
	Part string `cbor:"2,keyasint"`
	// Want is how many consumers job From had then: the resumed job
	// waits for as many checkpoints.
	Want int `cbor:"3,keyasint"`
	// Delivered is what reached the trainer through that consumer.
	Delivered ranges.Delivered `cbor:"4,keyasint"`
}

// ConsumerBody is the body of TypeAttachConsumer and TypeDetachConsumer.
type ConsumerBody struct {
	Job      string `cbor:"1,keyasint"`
	Consumer string `cbor:"2,keyasint"`
	// Metrics (AttachConsumer v2) is the consumer's latest metric, kept
	// in Job.ConsumerMetrics; nil keeps the one it had.
	Metrics *ScaleMetric `cbor:"3,keyasint,omitempty"`
}

// ExpireConsumersBody is the body of TypeExpireConsumers.
type ExpireConsumersBody struct {
	// Now is the proposer's clock, Unix nanoseconds.
	Now int64 `cbor:"1,keyasint"`
}

// AssignTaskBody is the body of TypeAssignTask.
type AssignTaskBody struct {
	Job    string `cbor:"1,keyasint"`
	Worker string `cbor:"2,keyasint"`
}

// LeaseSplitsBody is the body of TypeLeaseSplits.
type LeaseSplitsBody struct {
	Job       string `cbor:"1,keyasint"`
	Worker    string `cbor:"2,keyasint"`
	RequestID uint64 `cbor:"3,keyasint"`
	N         int    `cbor:"4,keyasint"`
	// Incarnation (version 2 only) identifies the worker process asking.
	Incarnation uint64 `cbor:"5,keyasint,omitempty"`
	// JobID, when set, is the job the worker's task runs: a lease for a
	// job since replaced under the same name (a resume) is refused.
	JobID uint64 `cbor:"6,keyasint,omitempty"`
	// Prefer (version 3) is the splits the worker would rather read (its
	// autocache holds them): handed out first (splits.LeasePreferring).
	// At most MaxPreferIntervals intervals.
	Prefer ranges.Set `cbor:"7,keyasint,omitempty"`
}

// MaxPreferIntervals bounds LeaseSplitsBody.Prefer.
const MaxPreferIntervals = 256

// FinishSplitsBody is the body of TypeFinishSplits.
type FinishSplitsBody struct {
	Job    string  `cbor:"1,keyasint"`
	Worker string  `cbor:"2,keyasint"`
	Epoch  int64   `cbor:"3,keyasint"`
	IDs    []int64 `cbor:"4,keyasint"`
}

// HandBackSplitsBody is the body of TypeHandBackSplits.
type HandBackSplitsBody struct {
	Job    string  `cbor:"1,keyasint"`
	Worker string  `cbor:"2,keyasint"`
	Epoch  int64   `cbor:"3,keyasint"`
	IDs    []int64 `cbor:"4,keyasint"`
	// JobID: as LeaseSplitsBody's.
	JobID uint64 `cbor:"5,keyasint,omitempty"`
}

// DrainTaskBody is the body of TypeDrainTask.
type DrainTaskBody struct {
	Job    string `cbor:"1,keyasint"`
	Worker string `cbor:"2,keyasint"`
	// JobID: as LeaseSplitsBody's (drain only).
	JobID uint64 `cbor:"3,keyasint,omitempty"`
	// Incarnation is the draining process's (drain only).
	Incarnation uint64 `cbor:"4,keyasint,omitempty"`
	// Rejoin: a later process of the worker rejoins the job.
	Rejoin bool `cbor:"5,keyasint,omitempty"`
}

// ProduceSplitsBody is the body of TypeProduceSplits.
type ProduceSplitsBody struct {
	Job    string                `cbor:"1,keyasint"`
	Worker string                `cbor:"2,keyasint"`
	Epoch  int64                 `cbor:"3,keyasint"`
	Splits []ranges.SplitEmitted `cbor:"4,keyasint"`
	// JobID: as LeaseSplitsBody's.
	JobID uint64 `cbor:"5,keyasint,omitempty"`
}

// Receipt is one entry of a ReceiptsBody: elements of one split a
// consumer received.
type Receipt struct {
	Epoch int64      `cbor:"1,keyasint" json:"epoch"`
	Split int64      `cbor:"2,keyasint" json:"split"`
	Got   ranges.Set `cbor:"3,keyasint" json:"got"`
}

// ReceiptsBody is the body of TypeReceipts.
type ReceiptsBody struct {
	Job      string    `cbor:"1,keyasint"`
	Consumer string    `cbor:"2,keyasint"`
	Receipts []Receipt `cbor:"3,keyasint,omitempty"`
	// Fenced are expired workers the consumer has stopped reading from;
	// Receipts cover everything it took from them.
	Fenced []string `cbor:"4,keyasint,omitempty"`
	// Seq numbers the consumer's reports from 1; a report whose number
	// was applied already (sent again after its answer was lost) changes
	// nothing. 0: unnumbered.
	Seq uint64 `cbor:"5,keyasint,omitempty"`
}

// WorkerBody is the body of TypeExpireWorker.
type WorkerBody struct {
	Worker string `cbor:"1,keyasint"`
	// Superseded (version 2, NewExpireSuperseded): expire the worker only
	// in the jobs where the process that leased last is this incarnation
	// or an older one.
	Superseded uint64 `cbor:"2,keyasint,omitempty"`
}

// JobBody is the body of TypeGarbageCollectJob.
type JobBody struct {
	Job string `cbor:"1,keyasint"`
}

// NewRegisterDataset registers d. It is idempotent: registering the same
// fingerprint with the same spec and split count again succeeds (result:
// false, nothing new); with a different spec or count it is rejected
// (ErrMismatch). Result: bool, whether the dataset is new.
func NewRegisterDataset(d Dataset) Command {
	return newCommand(TypeRegisterDataset, 1, RegisterDatasetBody{Dataset: d})
}

// NewCreateJob creates job name over the registered dataset fingerprint.
// It is idempotent by name: if the job exists with the same dataset and the
// same (normalized) options, the result is the existing job's ID; if they
// differ it is rejected with ErrMismatch and a message naming every
// difference, e.g. `job "j1" exists with sharding=dynamic, not off`. An
// unregistered dataset is ErrUnknownDataset. staticWorkers matters only for
// a new STATIC job: it is sorted, deduplicated and cut to MaxWorkers, and
// must not be empty; for an existing job it is ignored (the list agreed at
// creation stands). Result: uint64, the job ID.
func NewCreateJob(name, fingerprint string, o JobOptions, staticWorkers []string) Command {
	return NewCreateJobAt(name, fingerprint, o, staticWorkers, nil)
}

// NewCreateJobAt is NewCreateJob for an autoscaling job that starts at
// start.Workers instead of one worker, scaling up from there (Cachew's
// policy then tries one more, and converges back when it brings nothing),
// because an earlier job of its dataset converged there (a repeated
// training run need not climb from one worker again). A nil start is
// NewCreateJob; so is any start for a job that exists already. A start
// above the job's MaxWorkers starts at MaxWorkers.
func NewCreateJobAt(name, fingerprint string, o JobOptions, staticWorkers []string, start *ScaleStart) Command {
	v := createJobVersion(o)
	if start != nil {
		v = max(v, 3)
	}
	return newCommand(TypeCreateJob, v, CreateJobBody{Name: name, Fingerprint: fingerprint, Options: o, StaticWorkers: staticWorkers, Scale: start})
}

// createJobVersion is the least version that carries o: 5 with
// CountLoss (key 17), 4 with an offload boundary (options key 16, which a version-3 node would drop),
// 2 with Autoscale (key 12), else 1: a log that uses no new option stays
// readable by older nodes.
func createJobVersion(o JobOptions) uint16 {
	switch {
	case o.CountLoss:
		return 5
	case o.OffloadBoundary > 0:
		return 4
	case o.Autoscale:
		return 2
	}
	return 1
}

// resumeExpect is whose checkpoints a job resumed from the checkpoints of
// job from waits for, as far as j (the job of that name being replaced)
// tells: the consumers j had elements delivered to, if j is job from; the
// parts and expected parts j itself resumed with, if j is an earlier
// resume from the same checkpoints. Nil otherwise (job from is gone: the
// checkpoints' counts alone decide).
func resumeExpect(j *Job, from uint64) []string {
	d := j.Dynamic
	switch {
	case d == nil:
		return nil
	case j.ID == from && d.Exact != nil:
		return d.Exact.Receivers
	case d.Resume != nil && d.Resume.From == from:
		return slices.Concat(d.Resume.Parts, d.Resume.Expect)
	}
	return nil
}

// NewResumeJob is NewCreateJob for an exactly-once DYNAMIC job resumed
// from checkpoints (splits/resume.go), one command per checkpoint:
//   - a job of that name that waits for the checkpoints of job r.From
//     takes this one (again: no change);
//   - any other job of that name with the same dataset and options and no
//     consumer attached is replaced by a new one (a new ID) that waits for
//     r.Want checkpoints, this one first; with consumers attached it is
//     ErrJobInUse (stop them, or wait for their leases to expire);
//   - without a job of that name, that new job is created.
//
// A checkpoint of job r.From that is not in yet, for the job resumed from
// it once that has started, is ErrJobInUse while consumers read it (and
// replaces it once none does). Result: uint64, the job ID.
func NewResumeJob(name, fingerprint string, o JobOptions, r ResumeBody) Command {
	return newCommand(TypeCreateJob, createJobVersion(o), CreateJobBody{Name: name, Fingerprint: fingerprint, Options: o, Resume: &r})
}

// NewAttachConsumer attaches consumer to job, or renews its lease: the
// lease expires at the command's At + the job's ConsumerTTL. ErrUnknownJob
// if there is no such job; ErrLimit if NumConsumers are already attached;
// ErrDetached if the consumer detached (see Job.Detached). Result: int64,
// the lease expiry (Unix nanoseconds).
func NewAttachConsumer(job, consumer string) Command {
	return newCommand(TypeAttachConsumer, 1, ConsumerBody{Job: job, Consumer: consumer})
}

// NewHeartbeat is NewAttachConsumer with the consumer's latest metric
// (version 2): the job keeps it in ConsumerMetrics. A nil m is version 1.
func NewHeartbeat(job, consumer string, m *ScaleMetric) Command {
	if m == nil {
		return NewAttachConsumer(job, consumer)
	}
	mc := *m
	return newCommand(TypeAttachConsumer, 2, ConsumerBody{Job: job, Consumer: consumer, Metrics: &mc})
}

// NewDetachConsumer detaches consumer from job (absent is not an error).
// ErrUnknownJob if there is no such job. Result: bool, whether it was
// attached. Version 2 (this one) also remembers the consumer as detached
// for the job's ConsumerTTL (Job.Detached), so that its heartbeats still
// on their way do not attach it again; version 1 did not.
func NewDetachConsumer(job, consumer string) Command {
	return newCommand(TypeDetachConsumer, 2, ConsumerBody{Job: job, Consumer: consumer})
}

// NewExpireConsumers drops, from every job, the consumers whose lease
// expired before now (Unix nanoseconds, the proposer's clock; the leader
// proposes it periodically). A job left without consumers counts as such
// from its last lease's expiry. Result: map[string][]string, job → dropped
// consumers (sorted), only jobs that lost one.
func NewExpireConsumers(now int64) Command {
	return newCommand(TypeExpireConsumers, 1, ExpireConsumersBody{Now: now})
}

// NewAssignTask assigns worker a task for job. It is idempotent. ErrLimit
// if MaxWorkers live workers are assigned already; ErrNotAssigned if the
// job is STATIC and worker is not in its StaticWorkers, or if worker was
// expired from the job. Result: bool, whether the worker was newly
// assigned.
//
// Version 2 (this one): a worker expired from a job is out of it for good.
// ExpireWorker counted the splits it held as lost, and the job's consumers
// drop a worker they see expired and never read it again, so a worker put
// back into the job would lease splits that no consumer reads: a loss that
// nobody counts. It also stays expired in the job's share group when it is
// assigned to another job of that group (it cannot lease there, so that
// job gets its end of data at once), and is never put back into a
// coordinated job's rotation. A restarted node serves the jobs it was not
// expired from. Version 1 assigned an expired worker again, in the job and
// its share group.
func NewAssignTask(job, worker string) Command {
	return newCommand(TypeAssignTask, 2, AssignTaskBody{Job: job, Worker: worker})
}

// NewLeaseSplits leases up to n splits of a DYNAMIC job to worker, which
// must be assigned and live (ErrNotAssigned). n is clamped to
// [1, MaxLeaseSplits]; workers size it by their pipeline's rate
// (mesh/leasepolicy.go). requestID
// makes a retry safe: the same (worker, requestID) as the worker's last
// lease returns that lease again. Epochs advance inside this command (see
// splits.DynamicState): there is no separate AdvanceEpoch. Result:
// splits.Lease.
func NewLeaseSplits(job, worker string, requestID uint64, n int) Command {
	return newCommand(TypeLeaseSplits, 1, LeaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n})
}

// NewLeaseSplitsAs is LeaseSplits version 2: NewLeaseSplits from one
// incarnation of the worker (a number that grows with each start of its
// process, such as its start time; 0 behaves as version 1). A worker that
// restarts under the same name before it is declared dead would otherwise
// hold its old process's leases for good: nobody reads them, nobody
// expires them. So the first lease of a newer incarnation first counts the
// worker's outstanding leases as lost (at most once: the old process may
// have delivered part of them), as ExpireWorker would, but keeps the
// worker in the job. A lease from an older incarnation than the last seen
// (a request of the dead process still on its way) is rejected with
// ErrNotAssigned.
func NewLeaseSplitsAs(job, worker string, incarnation, requestID uint64, n int) Command {
	return newCommand(TypeLeaseSplits, 2, LeaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n, Incarnation: incarnation})
}

// NewLeaseSplitsOfJob is NewLeaseSplitsAs from a task of the job with ID
// jobID (0: unchecked): refused with ErrNotAssigned once a job resumed
// from checkpoints has replaced it under its name.
func NewLeaseSplitsOfJob(job string, jobID uint64, worker string, incarnation, requestID uint64, n int) Command {
	return NewLeaseSplitsPreferring(job, jobID, worker, incarnation, requestID, n, nil)
}

// NewLeaseSplitsPreferring is NewLeaseSplitsOfJob for a worker that would
// rather read the splits in prefer (those its autocache holds): the
// current epoch's splits in prefer not handed out yet come first, ahead of
// the leases' cursor (splits.DynamicState.LeasePreferring). Version 3 when
// prefer is not empty.
func NewLeaseSplitsPreferring(job string, jobID uint64, worker string, incarnation, requestID uint64, n int, prefer ranges.Set) Command {
	v := uint16(2)
	if len(prefer) > 0 {
		v = 3
	}
	return newCommand(TypeLeaseSplits, v, LeaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n, Incarnation: incarnation, JobID: jobID, Prefer: prefer})
}

// NewFinishSplits reports that worker finished ids of epoch in a DYNAMIC
// job. Every id must be outstanding for the worker (else the command is
// rejected, wrapping splits.ErrNotLeased, and nothing changes; a retry of a
// Finish that did commit gets that error). Result: splits.Progress after
// the command.
func NewFinishSplits(job, worker string, epoch int64, ids []int64) Command {
	return newCommand(TypeFinishSplits, 1, FinishSplitsBody{Job: job, Worker: worker, Epoch: epoch, IDs: ids})
}

// NewProduceSplits reports that worker has emitted every element of the
// given splits of epoch of an exactly-once DYNAMIC job, with the indices
// it emitted (splits.DynamicState.Produce). Result: splits.Progress.
func NewProduceSplits(job, worker string, epoch int64, done []ranges.SplitEmitted) Command {
	return newCommand(TypeProduceSplits, 1, ProduceSplitsBody{Job: job, Worker: worker, Epoch: epoch, Splits: done})
}

// NewProduceSplitsOfJob is NewProduceSplits from a task of the job with
// ID jobID, as NewLeaseSplitsOfJob.
func NewProduceSplitsOfJob(job string, jobID uint64, worker string, epoch int64, done []ranges.SplitEmitted) Command {
	return newCommand(TypeProduceSplits, 1, ProduceSplitsBody{Job: job, Worker: worker, Epoch: epoch, Splits: done, JobID: jobID})
}

// NewHandBackSplits returns splits of epoch that worker leased and has not
// started reading, from a task of the job with ID jobID (0: unchecked), so
// that other workers read them: a drain (splits.DynamicState.HandBack).
// It is refused with an error wrapping splits.ErrHandBackRefused when no
// other worker would take them: the worker is the job's last live one, or
// (at-most-once) everything is handed out. Result: splits.Progress.
func NewHandBackSplits(job string, jobID uint64, worker string, epoch int64, ids []int64) Command {
	return newCommand(TypeHandBackSplits, 1, HandBackSplitsBody{Job: job, Worker: worker, Epoch: epoch, IDs: ids, JobID: jobID})
}

// NewDrainTask records that worker's process incarnation drained its task
// of a DYNAMIC job before a graceful shutdown (mesh/drain.go): it holds no
// split of the job, leased or produced and not settled. Expiring the worker
// then loses nothing, and a later process of the node rejoins the job
// (NewRejoinTask). Refused while the worker holds a split. Result: nil.
func NewDrainTask(job string, jobID uint64, worker string, incarnation uint64) Command {
	return newCommand(TypeDrainTask, 1, DrainTaskBody{Job: job, JobID: jobID, Worker: worker, Incarnation: incarnation})
}

// NewRejoinTask gives a job back to a worker that drained or was expired
// from it (the leader plans it when a newer process of the node is alive:
// the process that drained, or was declared dead, holds nothing of the job
// any more): it is assigned afresh (Since is the command's At), and its
// consumers, who took the old process's end of data or dropped it, open
// streams to it again (a consumer of an exactly-once job fences the old
// process first). DYNAMIC jobs only, and not coordinated or sharing ones,
// whose workers are tied to rounds or a share group (an OFF job would
// deliver the whole dataset again). Result: nil.
//
// Version 2 (this one) keeps the worker's last incarnation across the
// rejoin: a lease from the old process still on its way is then refused
// as superseded once the new process has leased, and the new process's
// first lease expires whatever the old one held with an incarnation
// change its consumers see (they fence the old process on it). Version 1
// reset it to 0, so such a lease was taken as the new process's, and its
// splits were orphaned behind a fence no consumer knew to send.
func NewRejoinTask(job, worker string) Command {
	return newCommand(TypeDrainTask, 2, DrainTaskBody{Job: job, Worker: worker, Rejoin: true})
}

// NewReceipts reports, for an exactly-once DYNAMIC job, the elements
// consumer received since its last receipts, and the expired workers it
// fences (splits.DynamicState.Receive, Fence). The whole command applies or
// nothing does. Result: splits.Progress.
func NewReceipts(job, consumer string, seq uint64, receipts []Receipt, fenced []string) Command {
	return newCommand(TypeReceipts, 1, ReceiptsBody{Job: job, Consumer: consumer, Seq: seq, Receipts: receipts, Fenced: fenced})
}

// NewExpireWorker declares worker dead in every job: it is marked Expired
// and its outstanding DYNAMIC leases are lost, never leased again in their
// epoch. Idempotent. Result: map[string][]int64, job → lost split ids
// (ordered by epoch, then id; possibly empty), for every job in which the
// worker was live.
func NewExpireWorker(worker string) Command {
	return newCommand(TypeExpireWorker, 1, WorkerBody{Worker: worker})
}

// NewExpireSuperseded is ExpireWorker (version 2) for a worker whose node
// now runs a newer process than incarnation, the one that leased last in
// its jobs: a restart so quick that gossip never held the node left, so
// nothing expired the old process. Its leases are held by nobody: the
// new process starts a job's task only when a consumer opens a stream to
// it, and a consumer whose streams the old process ended for its drain
// waits for the job to take the worker back (a rejoin, after an expiry
// or a recorded drain). It expires the worker, as ExpireWorker does, in
// each job that takes a worker back (rejoinable) where the process that
// leased last is incarnation or older (not 0) and still holds splits; the
// leader then plans its rejoin (the newer process). A job where the new
// process has leased already, or the old one held nothing, is left alone.
func NewExpireSuperseded(worker string, incarnation uint64) Command {
	return newCommand(TypeExpireWorker, 2, WorkerBody{Worker: worker, Superseded: incarnation})
}

// NewGarbageCollectJob removes job. It is rejected with ErrJobInUse while
// a consumer is attached or until the job has been without one for its
// GCAfter, measured with the command's At (Job.GCDue). A missing job is not
// an error. Datasets are kept. Result: bool, whether the job existed.
func NewGarbageCollectJob(job string) Command {
	return newCommand(TypeGarbageCollectJob, 1, JobBody{Job: job})
}

func applyRegisterDataset(s *State, c Command) (any, error) {
	var b RegisterDatasetBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	d := b.Dataset
	if err := checkName("dataset fingerprint", d.Fingerprint); err != nil {
		return nil, err
	}
	if len(d.Spec) > MaxSpecBytes {
		return nil, fmt.Errorf("%w: spec of %d bytes, limit %d", ErrInvalidCommand, len(d.Spec), MaxSpecBytes)
	}
	if d.NumSplits < 0 || d.NumSplits > splits.MaxSplits {
		return nil, fmt.Errorf("%w: dataset with %d splits (want 0..%d)", ErrInvalidCommand, d.NumSplits, int64(splits.MaxSplits))
	}
	if have, ok := s.Datasets[d.Fingerprint]; ok {
		if !bytes.Equal(have.Spec, d.Spec) || have.NumSplits != d.NumSplits {
			return nil, fmt.Errorf("%w: dataset %q is registered with a different spec (%d bytes, %d splits; this one %d bytes, %d splits)",
				ErrMismatch, d.Fingerprint, len(have.Spec), have.NumSplits, len(d.Spec), d.NumSplits)
		}
		return false, nil
	}
	if len(s.Datasets) >= MaxDatasets {
		return nil, fmt.Errorf("%w: %d datasets registered", ErrLimit, len(s.Datasets))
	}
	d.Spec = slices.Clone(d.Spec)
	d.ScaleWorkers, d.ScaleJob = 0, "" // (the state machine's memory, not the registrant's)
	if d.Spec == nil {
		d.Spec = []byte{} // nil and empty must not differ after a snapshot
	}
	s.Datasets[d.Fingerprint] = d
	return true, nil
}

func applyCreateJob(s *State, c Command) (any, error) {
	var b CreateJobBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if v := createJobVersion(b.Options); c.Version < v {
		return nil, fmt.Errorf("%w: CreateJob v%d cannot carry these options (autoscale needs v2, offload_boundary v4, count_loss v5; want v%d)", ErrInvalidCommand, c.Version, v)
	}
	if st := b.Scale; st != nil {
		switch {
		case c.Version < 3:
			return nil, fmt.Errorf("%w: CreateJob v%d cannot carry a scale start (v3)", ErrInvalidCommand, c.Version)
		case !b.Options.Autoscale:
			return nil, fmt.Errorf("%w: job %q: a scale start is for autoscaling jobs", ErrInvalidCommand, b.Name)
		case st.Workers < 1 || st.Workers > MaxJobWorkers:
			return nil, fmt.Errorf("%w: job %q: scale start at %d workers (want 1..%d)", ErrInvalidCommand, b.Name, st.Workers, MaxJobWorkers)
		}
		if err := checkName("scale start's job name", st.From); err != nil {
			return nil, err
		}
	}
	if err := checkName("job name", b.Name); err != nil {
		return nil, err
	}
	if err := checkName("dataset fingerprint", b.Fingerprint); err != nil {
		return nil, err
	}
	o := b.Options.Normalized()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if b.Resume != nil && (o.Sharding != splits.Dynamic || o.Delivery != DeliveryExactlyOnce || o.Share) {
		return nil, fmt.Errorf("%w: job %q: only exactly-once DYNAMIC jobs without share resume from checkpoints", ErrInvalidCommand, b.Name)
	}
	var expect []string // a resume: consumers whose checkpoints it waits for, whatever the counts say
	if j, ok := s.Jobs[b.Name]; ok {
		d := j.Options.diff(o)
		if j.Fingerprint != b.Fingerprint {
			d = append([]string{fmt.Sprintf("dataset %s, not %s", j.Fingerprint, b.Fingerprint)}, d...)
		}
		if len(d) > 0 {
			return nil, &JobMismatchError{Job: b.Name, Diffs: d}
		}
		if b.Resume == nil {
			return j.ID, nil
		}
		if r := j.Dynamic.Resume; r != nil && r.From == b.Resume.From {
			_, in := slices.BinarySearch(r.Parts, b.Resume.Part)
			switch {
			case j.Dynamic.Waiting():
				if _, err := j.Dynamic.AddPart(b.Resume.Part, b.Resume.Want, b.Resume.Delivered); err != nil {
					return nil, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Name, err)
				}
				return j.ID, nil
			case in && len(j.Consumers) > 0:
				return j.ID, nil // a retry, or a consumer of the job joining again
			case len(j.Consumers) > 0:
				return nil, fmt.Errorf("%w: job %q (id %d) resumed from %d checkpoint(s) and is being read by %d consumer(s); the checkpoint of consumer %s came after it started (a job waits for as many checkpoints as it had consumers when they were taken)",
					ErrJobInUse, b.Name, j.ID, len(r.Parts), len(j.Consumers), b.Resume.Part)
			}
		}
		if len(j.Consumers) > 0 {
			return nil, fmt.Errorf("%w: job %q (id %d) still has %d consumer(s) attached; a job resumes from checkpoints once every consumer of it has stopped (Close) or its lease has expired (consumer_ttl %v)",
				ErrJobInUse, b.Name, j.ID, len(j.Consumers), j.Options.ConsumerTTL)
		}
		if b.Resume != nil {
			expect = resumeExpect(j, b.Resume.From)
		}
		delete(s.Jobs, b.Name) // replaced by the resumed job below
	}
	if strings.HasPrefix(b.Name, ShareGroupPrefix) {
		return nil, fmt.Errorf("%w: job name %q: the prefix %q is reserved for share groups", ErrInvalidCommand, b.Name, ShareGroupPrefix)
	}
	ds, ok := s.Datasets[b.Fingerprint]
	if !ok {
		return nil, fmt.Errorf("%w: job %q names dataset %q: register it first", ErrUnknownDataset, b.Name, b.Fingerprint)
	}
	if len(s.Jobs) >= MaxJobs {
		return nil, fmt.Errorf("%w: %d jobs exist", ErrLimit, len(s.Jobs))
	}
	group := ""
	if o.Share && o.Sharding == splits.Dynamic {
		if group = s.findShareGroup(ds.Fingerprint, o.Epochs); group == "" && len(s.Jobs)+1 >= MaxJobs {
			return nil, fmt.Errorf("%w: %d jobs exist, no room for the job and its share group", ErrLimit, len(s.Jobs))
		}
	}
	j := &Job{
		ID: s.applying, Name: b.Name, Fingerprint: b.Fingerprint, NumSplits: ds.NumSplits, Options: o,
		CreatedAt: c.At, Consumers: map[string]int64{}, Workers: map[string]WorkerState{}, NoConsumersSince: c.At,
	}
	switch o.Sharding {
	case splits.Static:
		ws, err := staticWorkers(b.StaticWorkers, o.MaxWorkers)
		if err != nil {
			return nil, fmt.Errorf("job %q: %w", b.Name, err)
		}
		j.StaticWorkers = ws
	case splits.Dynamic:
		epochs := o.Epochs
		if epochs < 0 {
			epochs = 0 // splits: 0 repeats forever
		}
		if b.Resume != nil {
			j.Dynamic = splits.NewDynamicResumed(ds.NumSplits, epochs, b.Resume.From)
			j.Dynamic.ExpectParts(expect)
			if _, err := j.Dynamic.AddPart(b.Resume.Part, b.Resume.Want, b.Resume.Delivered); err != nil {
				return nil, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Name, err)
			}
		} else if o.Delivery == DeliveryExactlyOnce {
			j.Dynamic = splits.NewDynamicExactlyOnce(ds.NumSplits, epochs)
		} else if o.CountLoss {
			j.Dynamic = splits.NewDynamicCounted(ds.NumSplits, epochs)
		} else {
			j.Dynamic = splits.NewDynamic(ds.NumSplits, epochs)
		}
		if o.Share {
			if group == "" {
				group = s.newShareGroup(ds, o, c.At)
			}
			j.ShareGroup = group
		}
	}
	if o.Coordinated {
		j.Rounds = &RoundState{Reached: map[int]int64{}}
	}
	if o.Autoscale {
		sc := NewScaleState()
		if st := b.Scale; st != nil {
			sc = warmScaleState(*st, o.MaxWorkers)
		}
		j.Scale = &sc
	}
	s.Jobs[b.Name] = j
	return j.ID, nil
}

// staticWorkers sorts, dedupes and checks a STATIC job's worker list, and
// keeps the first maxWorkers (0: all).
func staticWorkers(in []string, maxWorkers int) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: a static job needs the list of workers agreed at creation", ErrInvalidCommand)
	}
	if len(in) > MaxJobWorkers {
		return nil, fmt.Errorf("%w: %d static workers, limit %d", ErrLimit, len(in), MaxJobWorkers)
	}
	for _, w := range in {
		if err := checkName("worker id", w); err != nil {
			return nil, err
		}
	}
	ws := slices.Clone(in)
	slices.Sort(ws)
	ws = slices.Compact(ws)
	if maxWorkers > 0 && len(ws) > maxWorkers {
		ws = ws[:maxWorkers]
	}
	return slices.Clip(ws), nil
}

// jobOf decodes nothing: it finds the job for a handler, or ErrUnknownJob.
func (s *State) jobOf(name string) (*Job, error) {
	if err := checkName("job name", name); err != nil {
		return nil, err
	}
	j, ok := s.Jobs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownJob, name)
	}
	return j, nil
}

func applyAttachConsumer(s *State, c Command) (any, error) {
	var b ConsumerBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if j.Group {
		return nil, fmt.Errorf("%w: %q is a share group, not a job: attach to one of its jobs", ErrInvalidCommand, b.Job)
	}
	if _, ok := j.Detached[b.Consumer]; ok {
		return nil, fmt.Errorf("%w: consumer %q left job %q; a new consumer needs a new id", ErrDetached, b.Consumer, b.Job)
	}
	if _, ok := j.Consumers[b.Consumer]; !ok {
		limit := j.Options.NumConsumers
		if limit == 0 {
			limit = MaxJobConsumers
		}
		if len(j.Consumers) >= limit {
			return nil, fmt.Errorf("%w: job %q already has %d consumers (num_consumers %d); a consumer that crashed holds its place until its lease expires (consumer_ttl %s)",
				ErrLimit, b.Job, len(j.Consumers), j.Options.NumConsumers, j.Options.ConsumerTTL)
		}
	}
	if b.Metrics != nil {
		if c.Version < 2 {
			return nil, fmt.Errorf("%w: AttachConsumer v1 carries no metric", ErrInvalidCommand)
		}
		if err := b.Metrics.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	exp := addSat(c.At, j.Options.ConsumerTTL)
	j.Consumers[b.Consumer] = exp
	if b.Metrics != nil {
		if j.ConsumerMetrics == nil {
			j.ConsumerMetrics = map[string]ScaleMetric{}
		}
		j.ConsumerMetrics[b.Consumer] = *b.Metrics
		j.stepScale(b.Consumer, *b.Metrics)
		s.rememberScale(j)
	}
	j.NoConsumersSince = 0
	return exp, nil
}

func applyDetachConsumer(s *State, c Command) (any, error) {
	var b ConsumerBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if c.Version >= 2 && !j.Group {
		rememberDetached(j, b.Consumer, c.At)
	}
	if _, ok := j.Consumers[b.Consumer]; !ok {
		return false, nil
	}
	delete(j.Consumers, b.Consumer)
	delete(j.ConsumerMetrics, b.Consumer)
	if j.Dynamic != nil {
		j.Dynamic.Depart(b.Consumer)
	}
	departLocalWorker(j, b.Consumer)
	if len(j.Consumers) == 0 {
		j.NoConsumersSince = c.At
	}
	return true, nil
}

// rememberDetached records consumer in j.Detached, making room by
// forgetting the oldest (then smallest id) at MaxJobConsumers.
func rememberDetached(j *Job, consumer string, at int64) {
	if j.Detached == nil {
		j.Detached = map[string]int64{}
	}
	if _, ok := j.Detached[consumer]; !ok && len(j.Detached) >= MaxJobConsumers {
		oldest, first := "", true
		for id, t := range j.Detached {
			if first || t < j.Detached[oldest] || (t == j.Detached[oldest] && id < oldest) {
				oldest, first = id, false
			}
		}
		delete(j.Detached, oldest)
	}
	j.Detached[consumer] = at
}

func applyExpireConsumers(s *State, c Command) (any, error) {
	var b ExpireConsumersBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	dropped := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(s.Jobs)) {
		j := s.Jobs[name]
		for id, at := range j.Detached {
			if addSat(at, j.Options.ConsumerTTL) < b.Now {
				delete(j.Detached, id)
			}
		}
		if len(j.Detached) == 0 {
			j.Detached = nil // as a snapshot restores it
		}
		var gone []string
		var last int64
		for _, id := range slices.Sorted(maps.Keys(j.Consumers)) {
			if exp := j.Consumers[id]; exp < b.Now {
				gone = append(gone, id)
				last = max(last, exp)
			}
		}
		if len(gone) == 0 {
			continue
		}
		for _, id := range gone {
			delete(j.Consumers, id)
			delete(j.ConsumerMetrics, id)
			if j.Dynamic != nil {
				j.Dynamic.Depart(id)
			}
			departLocalWorker(j, id)
		}
		if len(j.Consumers) == 0 {
			j.NoConsumersSince = last
		}
		dropped[name] = gone
	}
	return dropped, nil
}

func applyAssignTask(s *State, c Command) (any, error) {
	var b AssignTaskBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("worker id", b.Worker); err != nil {
		return nil, err
	}
	st, known := j.Workers[b.Worker]
	if known && !st.Expired {
		return false, nil
	}
	if known && c.Version >= 2 {
		return nil, fmt.Errorf("%w: worker %q was expired from job %q (declared dead, the splits it held counted lost) and does not rejoin it: its consumers have dropped it",
			ErrNotAssigned, b.Worker, b.Job)
	}
	if j.Options.Sharding == splits.Static {
		if _, ok := slices.BinarySearch(j.StaticWorkers, b.Worker); !ok {
			return nil, fmt.Errorf("%w: job %q is static over %v, chosen at creation; %q is not among them",
				ErrNotAssigned, b.Job, j.StaticWorkers, b.Worker)
		}
	}
	if mw := j.scaledLimit(); mw > 0 {
		if live := j.activeWorkers(); live >= mw {
			return nil, fmt.Errorf("%w: job %q has %d live workers (its limit: max_workers, or what autoscaling chose, %d)", ErrLimit, b.Job, live, mw)
		}
	}
	if !known && len(j.Workers) >= MaxJobWorkers {
		return nil, fmt.Errorf("%w: job %q has had %d workers", ErrLimit, b.Job, len(j.Workers))
	}
	j.Workers[b.Worker] = WorkerState{Since: c.At}
	s.assignShareGroup(j, b.Worker, c.At, c.Version >= 2)
	if j.Rounds != nil {
		j.Rounds.addWorker(b.Worker)
	}
	return true, nil
}

// dynamicJobOf finds the DYNAMIC job of a worker's split command; needLive
// also requires the worker to be assigned and not expired.
func (s *State) dynamicJobOf(job, worker string, needLive bool) (*Job, error) {
	j, err := s.jobOf(job)
	if err != nil {
		return nil, err
	}
	if err := checkName("worker id", worker); err != nil {
		return nil, err
	}
	if j.Dynamic == nil {
		return nil, fmt.Errorf("%w: job %q has sharding=%v", ErrNotDynamic, job, j.Options.Sharding)
	}
	if st, ok := j.Workers[worker]; needLive && (!ok || st.Expired) {
		return nil, fmt.Errorf("%w: worker %q in job %q (assigned %v, expired %v)", ErrNotAssigned, worker, job, ok, st.Expired)
	}
	return j, nil
}

func applyLeaseSplits(s *State, c Command) (any, error) {
	var b LeaseSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if c.Version < 2 && b.Incarnation != 0 {
		return nil, fmt.Errorf("%w: LeaseSplits v1 with an incarnation", ErrInvalidCommand)
	}
	if len(b.Prefer) > 0 {
		if c.Version < 3 {
			return nil, fmt.Errorf("%w: LeaseSplits v%d with preferred splits (v3)", ErrInvalidCommand, c.Version)
		}
		if err := b.Prefer.Validate(); err != nil || b.Prefer.Intervals() > MaxPreferIntervals {
			return nil, fmt.Errorf("%w: preferred splits: %d intervals (limit %d), %v", ErrInvalidCommand, b.Prefer.Intervals(), MaxPreferIntervals, err)
		}
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, true)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	released := j.Workers[b.Worker].Released
	if st := j.Workers[b.Worker]; b.Incarnation != 0 && b.Incarnation != st.Incarnation {
		if b.Incarnation < st.Incarnation {
			return nil, fmt.Errorf("%w: worker %q in job %q: incarnation %d was superseded by %d (a restart)",
				ErrNotAssigned, b.Worker, b.Job, b.Incarnation, st.Incarnation)
		}
		if st.Incarnation != 0 {
			expireLeases(j, b.Worker) // the previous process's leases: lost, or orphaned
		}
		st.Incarnation = b.Incarnation
		j.Workers[b.Worker] = st
		if released {
			// The restart's leases are settled as above; the next lease
			// is refused, and the new process drains (release.go).
			return splits.Lease{}, nil
		}
	}
	if released {
		return nil, fmt.Errorf("%w: worker %q of job %q (autoscaling gave it back)", ErrReleased, b.Worker, b.Job)
	}
	if l, off := offloadLease(j, b.Worker); off {
		return l, nil
	}
	l := j.Dynamic.LeasePreferring(b.Worker, b.RequestID, min(max(b.N, 1), MaxLeaseSplits), b.Prefer)
	l.Cut = j.Options.OffloadBoundary // the job's cut now (a retry's answer carries the cut in force)
	return l, nil
}

// checkJobID refuses a worker's request for a job that has been replaced
// under its name since its task started (id 0: not checked).
func checkJobID(j *Job, id uint64) error {
	if id != 0 && id != j.ID {
		return fmt.Errorf("%w: job %q is now id %d; the task is of id %d, replaced (a resume)", ErrNotAssigned, j.Name, j.ID, id)
	}
	return nil
}

func applyFinishSplits(s *State, c Command) (any, error) {
	var b FinishSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, false)
	if err != nil {
		return nil, err
	}
	if len(b.IDs) > MaxFinishSplits {
		return nil, fmt.Errorf("%w: %d split ids, limit %d", ErrInvalidCommand, len(b.IDs), MaxFinishSplits)
	}
	if err := j.Dynamic.Finish(b.Worker, b.Epoch, b.IDs); err != nil {
		return nil, fmt.Errorf("job %q: %w", b.Job, err)
	}
	return j.Dynamic.Progress(), nil
}

func applyHandBackSplits(s *State, c Command) (any, error) {
	var b HandBackSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, true)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if len(b.IDs) > MaxLeaseSplits {
		return nil, fmt.Errorf("%w: %d split ids, limit %d", ErrInvalidCommand, len(b.IDs), MaxLeaseSplits)
	}
	if j.servingWorkers() < 2 {
		return nil, fmt.Errorf("job %q: %w: %q is its only worker that is neither expired nor drained", b.Job, splits.ErrHandBackRefused, b.Worker)
	}
	if err := j.Dynamic.HandBack(b.Worker, b.Epoch, b.IDs); err != nil {
		return nil, fmt.Errorf("job %q: %w", b.Job, err)
	}
	return j.Dynamic.Progress(), nil
}

// rejoinable reports whether a job takes back a worker that drained or
// was expired (NewRejoinTask).
func rejoinable(j *Job) bool {
	return j.Dynamic != nil && !j.Group && j.ShareGroup == "" && j.Rounds == nil
}

func applyDrainTask(s *State, c Command) (any, error) {
	var b DrainTaskBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if b.Rejoin {
		j, err := s.jobOf(b.Job)
		if err != nil {
			return nil, err
		}
		st, ok := j.Workers[b.Worker]
		if !ok || !(st.Drained || st.Expired) || !rejoinable(j) {
			return nil, fmt.Errorf("%w: worker %q of job %q is not drained or expired, or the job's workers are fixed: it does not rejoin", ErrNotAssigned, b.Worker, b.Job)
		}
		if mw := j.scaledLimit(); mw > 0 && (st.Expired || st.Released) && j.activeWorkers() >= mw {
			return nil, fmt.Errorf("%w: job %q has %d live workers (max_workers %d)", ErrLimit, b.Job, j.activeWorkers(), mw)
		}
		ws := WorkerState{Since: c.At}
		if c.Version >= 2 {
			ws.Incarnation = st.Incarnation
		}
		j.Workers[b.Worker] = ws
		return nil, nil
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, true)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if j.Group || j.Rounds != nil || j.ShareGroup != "" {
		return nil, fmt.Errorf("%w: job %q is shared or coordinated: its tasks do not drain", ErrInvalidCommand, b.Job)
	}
	if held := j.Dynamic.Held()[b.Worker]; held > 0 {
		return nil, fmt.Errorf("%w: worker %q still holds %d splits of job %q", ErrNotAssigned, b.Worker, held, b.Job)
	}
	st := j.Workers[b.Worker]
	st.Drained = true
	st.Incarnation = max(st.Incarnation, b.Incarnation)
	j.Workers[b.Worker] = st
	return nil, nil
}

func applyExpireWorker(s *State, c Command) (any, error) {
	var b WorkerBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkName("worker id", b.Worker); err != nil {
		return nil, err
	}
	if c.Version < 2 && b.Superseded != 0 {
		return nil, fmt.Errorf("%w: ExpireWorker v1 with an incarnation", ErrInvalidCommand)
	}
	lost := map[string][]int64{}
	for _, name := range slices.Sorted(maps.Keys(s.Jobs)) {
		j := s.Jobs[name]
		st, ok := j.Workers[b.Worker]
		if !ok || st.Expired {
			continue
		}
		if c.Version >= 2 && !holdsSuperseded(j, b.Worker, st, b.Superseded) {
			continue
		}
		st.Expired = true
		j.Workers[b.Worker] = st
		if sc := j.Scale; sc != nil && sc.Allocated && !st.Released {
			// The metrics that straddle the worker's replacement say
			// nothing about the count (jobs of a log from before
			// AllocateJob are not allocated and replay as they did).
			*sc = sc.WorkerLost(j.Options.tuneScale(scaleConfigAllocated))
		}
		if j.Rounds != nil {
			j.Rounds.evictWorker(b.Worker)
		}
		lost[name] = expireLeases(j, b.Worker)
	}
	return lost, nil
}

// holdsSuperseded reports whether worker's process of incarnation at most
// superseded (not 0: it leased) still holds splits of j, a job that takes
// a worker back (ExpireSuperseded). Elsewhere it holds nothing, or the
// newer process has leased, or the job does not take workers back (its
// new process's first lease settles the old one's there, as before).
func holdsSuperseded(j *Job, worker string, st WorkerState, superseded uint64) bool {
	return rejoinable(j) && st.Incarnation != 0 && st.Incarnation <= superseded && j.Dynamic.Held()[worker] > 0
}

func applyGarbageCollectJob(s *State, c Command) (any, error) {
	var b JobBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkName("job name", b.Job); err != nil {
		return nil, err
	}
	j, ok := s.Jobs[b.Job]
	if !ok {
		return false, nil
	}
	if j.Group {
		if s.groupReferenced(b.Job) {
			return nil, fmt.Errorf("%w: share group %q is read by a job", ErrJobInUse, b.Job)
		}
		delete(s.Jobs, b.Job)
		return true, nil
	}
	if len(j.Consumers) > 0 {
		return nil, fmt.Errorf("%w: job %q has %d consumers", ErrJobInUse, b.Job, len(j.Consumers))
	}
	if !j.GCDue(c.At) {
		return nil, fmt.Errorf("%w: job %q has had no consumer for %v of its gc_after %v",
			ErrJobInUse, b.Job, timeDiff(c.At, j.NoConsumersSince), j.Options.GCAfter)
	}
	delete(s.Jobs, b.Job)
	if g := j.ShareGroup; g != "" && !s.groupReferenced(g) {
		delete(s.Jobs, g) // its last job is gone: so are its leases
	}
	return true, nil
}

// expireLeases applies a worker's death to a DYNAMIC job's leases: lost
// (at-most-once; returned) or orphaned until the job's consumers fence the
// worker (exactly-once).
func expireLeases(j *Job, worker string) (lost []int64) {
	switch {
	case j.Dynamic == nil:
		return nil
	case j.Dynamic.Tracked():
		j.Dynamic.ExpireWorker(worker, slices.Sorted(maps.Keys(j.Consumers)))
		return nil
	default:
		return j.Dynamic.Expire(worker)
	}
}

// MaxReceipts bounds the entries of one Receipts command (and of one
// ProduceSplits), and MaxReceiptIntervals their intervals in total.
const (
	MaxReceipts         = 1 << 14
	MaxReceiptIntervals = jobspec.MaxReceiptIntervals
)

func applyProduceSplits(s *State, c Command) (any, error) {
	var b ProduceSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, false)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if len(b.Splits) > MaxReceipts {
		return nil, fmt.Errorf("%w: %d splits, limit %d", ErrInvalidCommand, len(b.Splits), MaxReceipts)
	}
	if err := j.Dynamic.Produce(b.Worker, b.Epoch, b.Splits); err != nil {
		return nil, fmt.Errorf("job %q: %w", b.Job, err)
	}
	return j.Dynamic.Progress(), nil
}

func applyReceipts(s *State, c Command) (any, error) {
	var b ReceiptsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if j.Dynamic == nil || !j.Dynamic.Tracked() {
		return nil, fmt.Errorf("%w: job %q is not exactly-once DYNAMIC (receipts)", ErrNotDynamic, b.Job)
	}
	if len(b.Receipts) > MaxReceipts || len(b.Fenced) > MaxJobWorkers {
		return nil, fmt.Errorf("%w: %d receipts, %d fences (limits %d, %d)", ErrInvalidCommand, len(b.Receipts), len(b.Fenced), MaxReceipts, MaxJobWorkers)
	}
	intervals := 0
	for _, r := range b.Receipts {
		intervals += r.Got.Intervals()
		if err := j.Dynamic.CheckReceipt(r.Epoch, r.Split, r.Got); err != nil {
			return nil, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Job, err)
		}
	}
	if intervals > MaxReceiptIntervals {
		return nil, fmt.Errorf("%w: %d receipt intervals, limit %d", ErrInvalidCommand, intervals, MaxReceiptIntervals)
	}
	for _, w := range b.Fenced {
		if err := checkName("worker id", w); err != nil {
			return nil, err
		}
	}
	// Report numbers are kept for attached consumers only, so that names
	// sent by anyone cannot grow the state; a consumer that is not (yet,
	// or any more) attached has its receipts applied unnumbered.
	seq := b.Seq
	if _, attached := j.Consumers[b.Consumer]; !attached {
		seq = 0
	}
	if !j.Dynamic.NewReport(b.Consumer, seq) {
		return j.Dynamic.Progress(), nil // applied before: its answer was lost
	}
	for _, r := range b.Receipts {
		if err := j.Dynamic.Receive(b.Consumer, r.Epoch, r.Split, r.Got); err != nil {
			// CheckReceipt passed, so this cannot happen; fail loudly
			// rather than leave half a command applied unnoticed.
			return nil, fmt.Errorf("job %q: receipts partly applied: %w", b.Job, err)
		}
	}
	for _, w := range b.Fenced {
		j.Dynamic.Fence(b.Consumer, w)
	}
	return j.Dynamic.Progress(), nil
}
