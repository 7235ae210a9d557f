package fsm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// WorkerState is a worker's task for a job.
type WorkerState struct {
	// Since is when the task was (last) assigned, Unix nanoseconds.
	Since int64 `cbor:"1,keyasint" json:"since"`
	// Expired: the worker was declared dead; its DYNAMIC leases were lost.
	// It is out of the job for good (AssignTask v2 refuses it; v1, in old
	// logs, revived it), unless a newer process of its node rejoins a
	// DYNAMIC job (NewRejoinTask).
	Expired bool `cbor:"2,keyasint" json:"expired"`
	// Incarnation is the worker process's incarnation that leased last
	// (LeaseSplits v2; 0 before any v2 lease). A lease from a newer
	// incarnation means the worker restarted before it was declared dead:
	// the leases of the old process are lost then (see NewLeaseSplitsAs).
	Incarnation uint64 `cbor:"3,keyasint,omitempty" json:"incarnation,omitempty"`
	// Ended: the worker's task of the job has ended (EndTask): its data
	// ended, or it failed.
	Ended bool `cbor:"4,keyasint,omitempty" json:"ended,omitempty"`
	// Drained: the worker's process (Incarnation) shut down gracefully
	// and drained its task (NewDrainTask): it held nothing of the job
	// when it left, so a later process of the same node rejoins the job
	// (NewRejoinTask), expired or not, instead of being out of it for good.
	Drained bool `cbor:"5,keyasint,omitempty" json:"drained,omitempty"`
	// Dismissed: the job gave the worker back (AllocateJob, cmd_allocatejob.go):
	// its leases are refused, and it drains. Once Drained too, its node is
	// free, and the job takes it back only through NewRejoinTask.
	Dismissed bool `cbor:"6,keyasint,omitempty" json:"released,omitempty"`
}

// Dismissing reports whether worker was dismissed from the job and has not
// drained yet: its node still serves the job.
func (st WorkerState) Dismissing() bool { return st.Dismissed && !st.Drained && !st.Expired }

// JobFailure is why a job failed (EndTask with a failure): the first
// failure a worker reported. A failed job keeps running on its other workers, but its
// consumers stop with the error, and `feedmesh jobs` shows it failed.
type JobFailure struct {
	// Worker is the worker whose task failed.
	Worker string `cbor:"1,keyasint" json:"worker"`
	// Reason is the task's error, at most MaxFailureBytes.
	Reason string `cbor:"2,keyasint" json:"reason"`
	// At is the EndTask's At, Unix nanoseconds.
	At int64 `cbor:"3,keyasint" json:"at"`
}

// Job is a named run of a dataset, as stored in the state.
type Job struct {
	// ID is the log index of the CreateJob that made the job: unique over
	// the life of the cluster, so a job re-created under the same name
	// after garbage collection has a new ID.
	ID uint64 `cbor:"1,keyasint" json:"id"`
	// Name is the job's name (the key of State.Jobs).
	Name string `cbor:"2,keyasint" json:"name"`
	// Fingerprint is the job's dataset.
	Fingerprint string `cbor:"3,keyasint" json:"fingerprint"`
	// NumSplits is the dataset's, copied at CreateJob.
	NumSplits int64 `cbor:"4,keyasint" json:"num_splits"`
	// Options are the job's options, normalized (jobspec.Job): carried as
	// they are by CreateJob v6, converted once from an older CreateJob's
	// (JobOptions.stored).
	Options jobspec.Job `cbor:"5,keyasint" json:"options"`
	// CreatedAt is the CreateJob's At, Unix nanoseconds.
	CreatedAt int64 `cbor:"6,keyasint" json:"created_at"`
	// Consumers maps consumer id → lease expiry, Unix nanoseconds.
	Consumers map[string]int64 `cbor:"7,keyasint" json:"consumers"`
	// Workers are the workers ever assigned (until the job is collected).
	Workers map[string]WorkerState `cbor:"8,keyasint" json:"workers"`
	// StaticWorkers (STATIC only) is the sorted worker list agreed at
	// CreateJob: split i goes to StaticWorkers[i mod n].
	StaticWorkers []string `cbor:"9,keyasint" json:"static_workers,omitempty"`
	// Dynamic (DYNAMIC only) is the split lease bookkeeping.
	Dynamic *splits.DynamicState `cbor:"10,keyasint" json:"dynamic,omitempty"`
	// NoConsumersSince is when the job last lost its last consumer (or was
	// created without one), Unix nanoseconds; 0 while any is attached.
	NoConsumersSince int64 `cbor:"11,keyasint" json:"no_consumers_since"`
	// ShareGroup (DYNAMIC jobs with Share only) names the share group whose
	// split leases this job reads: see sharegroup.go. Empty otherwise.
	ShareGroup string `cbor:"12,keyasint,omitempty" json:"share_group,omitempty"`
	// Group marks a share group: a hidden job that holds the DYNAMIC split
	// leases of every sharing job of one dataset and epoch count. It has no
	// consumers of its own and lives while a job references it.
	Group bool `cbor:"13,keyasint,omitempty" json:"group,omitempty"`
	// Rounds (coordinated jobs only) is the round schedule and consumer
	// progress: see rounds.go.
	Rounds *RoundState `cbor:"14,keyasint,omitempty" json:"rounds,omitempty"`
	// Detached maps consumer id → the At of its DetachConsumer (v2), for
	// the job's ConsumerTTL after it (ExpireConsumers forgets it then; at
	// most 4096, the oldest forgotten first). AttachConsumer
	// refuses these ids (ErrDetached): a detach is final, so a heartbeat
	// that reaches the leader after its consumer's detach cannot attach it
	// again and keep the job alive for a whole ConsumerTTL.
	Detached map[string]int64 `cbor:"15,keyasint,omitempty" json:"detached,omitempty"`
	// Failure is set once a worker reported that its task of the job
	// failed (EndTask); nil while none has. It never changes after that.
	Failure *JobFailure `cbor:"16,keyasint,omitempty" json:"failure,omitempty"`
	// ConsumerMetrics maps an attached consumer to the last metric its
	// heartbeat carried (AttachConsumer v2): its batch time, result
	// queue and stall, what autoscaling follows. A consumer's entry goes
	// with it.
	ConsumerMetrics map[string]autoscale.Metric `cbor:"17,keyasint,omitempty" json:"consumer_metrics,omitempty"`
	// Scale (Options.Autoscale) is the autoscaling policy's state: how
	// many workers the job should have, and why.
	Scale *autoscale.State `cbor:"18,keyasint,omitempty" json:"scale,omitempty"`
	// CountLoss (an at-most-once DYNAMIC job without share or coordinated
	// reads): the job keeps exactly-once's bookkeeping to count exactly
	// the elements a dead worker's splits lose (splits/census.go); its
	// splits are still never delivered again. The proposer (mesh) sets it
	// for every such job whose pipeline allows it (no take or skip): it is
	// the cluster's decision, not an option a consumer asks for. A job
	// without it, or of a log from before it, counts its loss in splits
	// only. (CreateJob v5 carried it in the options, key 17.)
	CountLoss bool `cbor:"19,keyasint,omitempty" json:"count_loss,omitempty"`
	// Offload is the consumers' offload state (offload.go); nil when
	// none asked.
	Offload *OffloadState `cbor:"40,keyasint,omitempty" json:"offload,omitempty"`
	// Owner is who created the job (CreateJob v7); nil for a job of an
	// older entry: the default tenant's.
	Owner *Owner `cbor:"41,keyasint,omitempty" json:"owner,omitempty"`
}

// Clone returns a deep copy.
func (j *Job) Clone() *Job {
	c := *j
	c.Consumers = maps.Clone(j.Consumers)
	c.Detached = maps.Clone(j.Detached)
	c.ConsumerMetrics = maps.Clone(j.ConsumerMetrics)
	c.Workers = maps.Clone(j.Workers)
	c.StaticWorkers = slices.Clone(j.StaticWorkers)
	c.Dynamic = j.Dynamic.Clone()
	c.Rounds = j.Rounds.clone()
	c.Offload = j.Offload.clone()
	if j.Scale != nil {
		sc := *j.Scale
		c.Scale = &sc
	}
	if j.Failure != nil {
		f := *j.Failure
		c.Failure = &f
	}
	return &c
}

// servingWorkers counts the assigned workers neither expired nor drained.
func (j *Job) servingWorkers() int {
	n := 0
	for _, st := range j.Workers {
		if !st.Expired && !st.Drained {
			n++
		}
	}
	return n
}

// ActiveWorkers counts the workers that count toward the job's worker
// count: assigned, neither expired nor dismissed.
func (j *Job) ActiveWorkers() int {
	n := 0
	for _, st := range j.Workers {
		if !st.Expired && !st.Dismissed {
			n++
		}
	}
	return n
}

// liveWorkers returns the assigned workers that are not expired, sorted:
// nodes only, a consumer's local worker (offload.go) does not count
// toward max_workers.
func (j *Job) liveWorkers() []string {
	var ws []string
	for w, st := range j.Workers {
		if _, local := jobspec.LocalWorkerOf(w); !st.Expired && !local {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	return ws
}

// ConsumerIDs returns the attached consumers, sorted.
func (j *Job) ConsumerIDs() []string { return slices.Sorted(maps.Keys(j.Consumers)) }

// gcDue reports whether the job may be garbage-collected at now (Unix
// nanoseconds): no consumer is attached and none has been for GCAfter. The
// leader uses it to decide when to propose GarbageCollectJob.
func (j *Job) gcDue(now int64) bool {
	return len(j.Consumers) == 0 && now >= addSat(j.NoConsumersSince, j.Options.GCAfter())
}

// staticSplits returns the splits worker reads in a STATIC job (nil for
// other policies or a worker not in StaticWorkers).
func (j *Job) staticSplits(worker string) []int64 {
	if j.Options.Sharding() != jobspec.Static {
		return nil
	}
	return splits.StaticAssignment(j.NumSplits, j.StaticWorkers, worker)
}

// Rejoinable reports whether the job takes back a worker that drained or
// was expired (NewRejoinTask): a DYNAMIC job that neither shares nor reads
// in rounds, whose workers are tied to a share group or a rotation.
func (j *Job) Rejoinable() bool {
	return j.Dynamic != nil && !j.Group && j.ShareGroup == "" && j.Rounds == nil
}

// HoldsSuperseded reports whether worker's process of incarnation at most
// superseded (not 0: it leased) still holds splits of j, a job that takes
// a worker back (ExpireSuperseded). Elsewhere it holds nothing, or the
// newer process has leased, or the job does not take workers back (its
// new process's first lease settles the old one's there, as before).
func (j *Job) HoldsSuperseded(worker string, superseded uint64) bool {
	st := j.Workers[worker]
	return j.Rejoinable() && st.Incarnation != 0 && st.Incarnation <= superseded && j.Dynamic.Held()[worker] > 0
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
		return nil, fmt.Errorf("%w: job %q has sharding=%v", ErrNotDynamic, job, j.Options.Sharding())
	}
	if st, ok := j.Workers[worker]; needLive && (!ok || st.Expired) {
		return nil, fmt.Errorf("%w: worker %q in job %q (assigned %v, expired %v)", ErrNotAssigned, worker, job, ok, st.Expired)
	}
	return j, nil
}

// checkJobID refuses a worker's request for a job that has been replaced
// under its name since its task started (id 0: not checked).
func checkJobID(j *Job, id uint64) error {
	if id != 0 && id != j.ID {
		return fmt.Errorf("%w: job %q is now id %d; the task is of id %d, replaced (a resume)", ErrNotAssigned, j.Name, j.ID, id)
	}
	return nil
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
