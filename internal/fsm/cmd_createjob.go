package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// createJobBody is the body of TypeCreateJob v1..v5: the job's options in
// the legacy form (JobOptions), converted once on decode.
type createJobBody struct {
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

// createJobV6 is the first CreateJob version that carries the job's
// options as jobspec encodes them: v6 carries jobspec schema 1, and a
// schema s needs version createJobV6-1+s (a node refuses the versions of
// a schema it does not know, as any version it does not know).
const createJobV6 = 6

// createJobOwnerV7 is the first CreateJob that may carry the job's owner
// (key 9): v7 carries jobspec schema 1 as v6 does, and an owner. So the
// next schema needs v8: from v7 on, a schema s needs createJobOwnerV7-1+s
// (and v6, schema 1 without an owner, stays what it was).
const createJobOwnerV7 = 7

// createJobMaxVersion is the newest CreateJob this node knows.
const createJobMaxVersion = createJobOwnerV7 - 1 + jobspec.Schema

// createJobBodyV6 is the body of TypeCreateJob v6 and later: the job's
// options under their own key, in jobspec's encoding (key 3 held the
// legacy form), and the proposer's count_loss beside them.
type createJobBodyV6 struct {
	Name          string      `cbor:"1,keyasint"`
	Fingerprint   string      `cbor:"2,keyasint"`
	StaticWorkers []string    `cbor:"4,keyasint,omitempty"`
	Resume        *ResumeBody `cbor:"5,keyasint,omitempty"`
	Scale         *ScaleStart `cbor:"6,keyasint,omitempty"`
	// Options are the job's options, normalized (decoding a jobspec.Job
	// normalizes and checks it).
	Options jobspec.Job `cbor:"7,keyasint"`
	// CountLoss: Job.CountLoss.
	CountLoss bool `cbor:"8,keyasint,omitempty"`
	// Owner (v7) is who creates the job: Job.Owner. Of an existing job
	// (a consumer joining, a resume), it must be of the job's tenant.
	Owner *Owner `cbor:"9,keyasint,omitempty"`
}

// createJob is a CreateJob of any version, decoded and checked on its
// own (checkCreateJob, checkCreateJobV6), as applyCreateJob applies it.
type createJob struct {
	Name          string
	Fingerprint   string
	Options       jobspec.Job
	CountLoss     bool
	StaticWorkers []string
	Resume        *ResumeBody
	Scale         *ScaleStart
	Owner         *Owner
}

// Create is a new job as a node proposes it (NewCreateJob: CreateJob v6).
type Create struct {
	// Name and Fingerprint name the job and its registered dataset.
	Name, Fingerprint string
	// Options are the job's options (jobspec.Options.Normalize's Job).
	Options jobspec.Job
	// CountLoss: Job.CountLoss, the proposer's decision.
	CountLoss bool
	// StaticWorkers (a new STATIC job) is the worker list agreed at
	// creation: sorted, deduplicated and cut to MaxWorkers; it must not be
	// empty. Ignored for an existing job.
	StaticWorkers []string
	// Scale (a new autoscaling job) starts it at more than one worker,
	// where an earlier job of its dataset converged: see NewCreateJobAt.
	Scale *ScaleStart
	// Owner, if set, is who creates the job (CreateJob v7: Job.Owner). A
	// command for an existing job (a consumer joining it, a resume
	// replacing it) is refused with ErrPermission unless Owner's tenant
	// is the job's (an administrator acting on another tenant's job
	// proposes it with the job's owner).
	Owner *Owner
}

// ScaleStart is where a new autoscaling job starts: at Workers, the count
// at which job From of its dataset converged (Dataset.ScaleWorkers). The
// proposer reads it from its state and puts it in the command, so every
// replica starts the job alike.
type ScaleStart struct {
	Workers int    `cbor:"1,keyasint"`
	From    string `cbor:"2,keyasint"`
}

// ResumeBody is one consumer's checkpoint (createJobBody.Resume).
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

// NewCreateJob creates job c.Name over the registered dataset
// c.Fingerprint (CreateJob v6: the options as jobspec.Job carries them).
// It is idempotent by name: if the job exists with the same dataset and
// the same options (count_loss included), the result is the existing
// job's ID; if they differ it is rejected with a JobMismatchError naming
// every difference, e.g. `job "j1" exists with sharding=dynamic, not off`.
// An unregistered dataset is ErrUnknownDataset. For a new STATIC job
// c.StaticWorkers is sorted, deduplicated and cut to MaxWorkers, and must
// not be empty; for an existing job it is ignored (the list agreed at
// creation stands). c.Scale starts a new autoscaling job at
// c.Scale.Workers instead of one worker, scaling up from there (Cachew's
// policy then tries one more, and converges back when it brings nothing),
// because an earlier job of its dataset converged there (a repeated
// training run need not climb from one worker again); a start above the
// job's MaxWorkers starts at MaxWorkers, and any start of a job that
// exists already is ignored. Result: uint64, the job ID.
//
// A node that knows CreateJob up to v5 refuses it (ErrUnknownVersion):
// every node must run this version or later.
func NewCreateJob(c Create) Command {
	return newCommand(TypeCreateJob, c.version(), c.body())
}

// version is the least CreateJob version that carries c: v6 for schema 1
// without an owner, else from v7 on.
func (c Create) version() uint16 {
	if c.Owner == nil {
		return createJobV6 - 1 + uint16(c.Options.Schema())
	}
	return createJobOwnerV7 - 1 + uint16(c.Options.Schema())
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
// replaces it once none does). c.StaticWorkers and c.Scale do not apply.
// Result: uint64, the job ID.
func NewResumeJob(c Create, r ResumeBody) Command {
	b := c.body()
	b.StaticWorkers, b.Scale, b.Resume = nil, nil, &r
	return newCommand(TypeCreateJob, c.version(), b)
}

func (c Create) body() createJobBodyV6 {
	return createJobBodyV6{Name: c.Name, Fingerprint: c.Fingerprint, Options: c.Options, CountLoss: c.CountLoss, StaticWorkers: c.StaticWorkers, Scale: c.Scale, Owner: c.Owner}
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

// applyCreateJob creates a job, or finds the one of that name, or
// replaces it by a job resumed from checkpoints. Its result is the job's
// ID. The steps check in the order the log has always been applied in: an
// older node rejects the same entries with the same errors.
func applyCreateJob(s *State, c Command) (any, error) {
	b, err := decodeCreateJob(c)
	if err != nil {
		return nil, err
	}
	o := b.Options
	var expect []string // a resume: consumers whose checkpoints it waits for, whatever the counts say
	if j, ok := s.Jobs[b.Name]; ok {
		if b.Owner != nil && TenantOf(j.Owner) != b.Owner.Tenant {
			return nil, fmt.Errorf("%w: job %q is another tenant's", ErrPermission, b.Name)
		}
		id, replace, err := existingJob(j, b)
		if !replace {
			return id, err
		}
		if b.Resume != nil {
			expect = resumeExpect(j, b.Resume.From)
		}
		// Replaced by the resumed job below. (A resume that fails after
		// this line has removed the job all the same: logs hold such
		// entries, and every replica must keep applying them alike.)
		delete(s.Jobs, b.Name)
	}
	ds, group, err := s.roomForJob(b)
	if err != nil {
		return nil, err
	}
	j := &Job{
		ID: s.applying, Name: b.Name, Fingerprint: b.Fingerprint, NumSplits: ds.NumSplits, Options: o, CountLoss: b.CountLoss,
		CreatedAt: c.At, Consumers: map[string]int64{}, Workers: map[string]WorkerState{}, NoConsumersSince: c.At,
	}
	if b.Owner != nil {
		o := *b.Owner
		j.Owner = &o
	}
	switch o.Sharding() {
	case jobspec.Static:
		ws, err := staticWorkers(b.StaticWorkers, o.MaxWorkers())
		if err != nil {
			return nil, fmt.Errorf("job %q: %w", b.Name, err)
		}
		j.StaticWorkers = ws
	case jobspec.Dynamic:
		if j.Dynamic, err = newDynamic(b, ds, expect); err != nil {
			return nil, err
		}
		if o.Share() {
			if group == "" {
				if group, err = s.newShareGroup(ds, o.Epochs(), c.At); err != nil {
					return nil, err
				}
			}
			j.ShareGroup = group
		}
	}
	if o.Coordinated() {
		j.Rounds = &RoundState{Reached: map[int]int64{}}
	}
	if o.Autoscale() {
		sc := autoscale.NewState()
		if st := b.Scale; st != nil {
			sc = warmScaleState(*st, o.MaxWorkers())
		}
		j.Scale = &sc
	}
	s.Jobs[b.Name] = j
	return j.ID, nil
}

// decodeCreateJob decodes a CreateJob of any version and checks what it
// says on its own.
func decodeCreateJob(c Command) (createJob, error) {
	if c.Version >= createJobV6 {
		var b createJobBodyV6
		if err := decodeBody(c, &b); err != nil {
			return createJob{}, err
		}
		return checkCreateJobV6(b, c.Version)
	}
	var b createJobBody
	if err := decodeBody(c, &b); err != nil {
		return createJob{}, err
	}
	return checkCreateJob(b, c.Version)
}

// checkCreateJob checks what a CreateJob v1..v5 says on its own (its
// version, scale start, names and options, in the order it always has)
// and converts its options, normalized, to a job's.
func checkCreateJob(b createJobBody, version uint16) (createJob, error) {
	if v := createJobVersion(b.Options); version < v {
		return createJob{}, fmt.Errorf("%w: CreateJob v%d cannot carry these options (autoscale needs v2, offload_boundary v4, count_loss v5; want v%d)", ErrInvalidCommand, version, v)
	}
	if st := b.Scale; st != nil {
		switch {
		case version < 3:
			return createJob{}, fmt.Errorf("%w: CreateJob v%d cannot carry a scale start (v3)", ErrInvalidCommand, version)
		case !b.Options.Autoscale:
			return createJob{}, fmt.Errorf("%w: job %q: a scale start is for autoscaling jobs", ErrInvalidCommand, b.Name)
		}
	}
	if err := checkScaleStart(b.Name, b.Scale); err != nil {
		return createJob{}, err
	}
	if err := checkNames(b.Name, b.Fingerprint); err != nil {
		return createJob{}, err
	}
	o := b.Options.Normalized()
	if err := o.validate(); err != nil {
		return createJob{}, err
	}
	if b.Resume != nil && (o.Sharding != splits.Dynamic || o.Delivery != DeliveryExactlyOnce || o.Share) {
		return createJob{}, fmt.Errorf("%w: job %q: only exactly-once DYNAMIC jobs without share resume from checkpoints", ErrInvalidCommand, b.Name)
	}
	job, err := o.stored()
	if err != nil {
		return createJob{}, err
	}
	return createJob{Name: b.Name, Fingerprint: b.Fingerprint, Options: job, CountLoss: o.CountLoss, StaticWorkers: b.StaticWorkers, Resume: b.Resume, Scale: b.Scale}, nil
}

// checkCreateJobV6 checks what a CreateJob v6 or later says on its own:
// its options (which decoding normalized and checked against jobspec's
// rules, and here against the state machine's: checkStored), its scale
// start and names.
func checkCreateJobV6(b createJobBodyV6, version uint16) (createJob, error) {
	o := b.Options
	if o.IsZero() {
		return createJob{}, fmt.Errorf("%w: CreateJob v%d of job %q without the job's options (key 7)", ErrInvalidCommand, version, b.Name)
	}
	if v := createJobV6 - 1 + uint16(o.Schema()); version < v {
		return createJob{}, fmt.Errorf("%w: CreateJob v%d cannot carry these options (job options schema %d: want v%d)", ErrInvalidCommand, version, o.Schema(), v)
	}
	if b.Owner != nil && version < createJobOwnerV7 {
		return createJob{}, fmt.Errorf("%w: CreateJob v%d cannot carry an owner (v%d)", ErrInvalidCommand, version, createJobOwnerV7)
	}
	if err := checkOwner(b.Owner); err != nil {
		return createJob{}, err
	}
	if b.Scale != nil && !o.Autoscale() {
		return createJob{}, fmt.Errorf("%w: job %q: a scale start is for autoscaling jobs", ErrInvalidCommand, b.Name)
	}
	if err := checkScaleStart(b.Name, b.Scale); err != nil {
		return createJob{}, err
	}
	if err := checkNames(b.Name, b.Fingerprint); err != nil {
		return createJob{}, err
	}
	if err := checkStored(o, b.CountLoss); err != nil {
		return createJob{}, err
	}
	if b.Resume != nil && (o.Sharding() != jobspec.Dynamic || o.Delivery() != jobspec.ExactlyOnce || o.Share()) {
		return createJob{}, fmt.Errorf("%w: job %q: only exactly-once DYNAMIC jobs without share resume from checkpoints", ErrInvalidCommand, b.Name)
	}
	return createJob{Name: b.Name, Fingerprint: b.Fingerprint, Options: o, CountLoss: b.CountLoss, StaticWorkers: b.StaticWorkers, Resume: b.Resume, Scale: b.Scale, Owner: b.Owner}, nil
}

// checkScaleStart checks a scale start's count and the job it names.
func checkScaleStart(job string, st *ScaleStart) error {
	if st == nil {
		return nil
	}
	if st.Workers < 1 || st.Workers > maxJobWorkers {
		return fmt.Errorf("%w: job %q: scale start at %d workers (want 1..%d)", ErrInvalidCommand, job, st.Workers, maxJobWorkers)
	}
	return checkName("scale start's job name", st.From)
}

// checkNames checks a CreateJob's job name and dataset fingerprint.
func checkNames(name, fingerprint string) error {
	if err := checkName("job name", name); err != nil {
		return err
	}
	return checkName("dataset fingerprint", fingerprint)
}

// existingJob decides a CreateJob for a name that has job j: its ID (a
// retry, a consumer joining, a checkpoint the resumed job waits for), an
// error, or replace: a resume replaces j.
func existingJob(j *Job, b createJob) (id any, replace bool, err error) {
	d := optionsDiff(j.Options, j.CountLoss, b.Options, b.CountLoss)
	if j.Fingerprint != b.Fingerprint {
		d = append([]string{fmt.Sprintf("dataset %s, not %s", j.Fingerprint, b.Fingerprint)}, d...)
	}
	if len(d) > 0 {
		return nil, false, &JobMismatchError{Job: b.Name, Diffs: d}
	}
	if b.Resume == nil {
		return j.ID, false, nil
	}
	if r := j.Dynamic.Resume; r != nil && r.From == b.Resume.From {
		_, in := slices.BinarySearch(r.Parts, b.Resume.Part)
		switch {
		case j.Dynamic.Waiting():
			if _, err := j.Dynamic.AddPart(b.Resume.Part, b.Resume.Want, b.Resume.Delivered); err != nil {
				return nil, false, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Name, err)
			}
			return j.ID, false, nil
		case in && len(j.Consumers) > 0:
			return j.ID, false, nil // a retry, or a consumer of the job joining again
		case len(j.Consumers) > 0:
			return nil, false, fmt.Errorf("%w: job %q (id %d) resumed from %d checkpoint(s) and is being read by %d consumer(s); the checkpoint of consumer %s came after it started (a job waits for as many checkpoints as it had consumers when they were taken)",
				ErrJobInUse, b.Name, j.ID, len(r.Parts), len(j.Consumers), b.Resume.Part)
		}
	}
	if len(j.Consumers) > 0 {
		return nil, false, fmt.Errorf("%w: job %q (id %d) still has %d consumer(s) attached; a job resumes from checkpoints once every consumer of it has stopped (Close) or its lease has expired (consumer_ttl %v)",
			ErrJobInUse, b.Name, j.ID, len(j.Consumers), j.Options.ConsumerTTL())
	}
	return nil, true, nil
}

// roomForJob checks that a new job may be created: its name, its
// dataset, the bounds, and room for a share group if it needs a new one
// (group: the share group it joins, "" if none or a new one).
func (s *State) roomForJob(b createJob) (ds Dataset, group string, err error) {
	o := b.Options
	if strings.HasPrefix(b.Name, shareGroupPrefix) {
		return Dataset{}, "", fmt.Errorf("%w: job name %q: the prefix %q is reserved for share groups", ErrInvalidCommand, b.Name, shareGroupPrefix)
	}
	ds, ok := s.Datasets[b.Fingerprint]
	if !ok {
		return Dataset{}, "", fmt.Errorf("%w: job %q names dataset %q: register it first", ErrUnknownDataset, b.Name, b.Fingerprint)
	}
	if len(s.Jobs) >= maxJobs {
		return Dataset{}, "", fmt.Errorf("%w: %d jobs exist", ErrLimit, len(s.Jobs))
	}
	if o.Share() && o.Sharding() == jobspec.Dynamic {
		if group = s.findShareGroup(ds.Fingerprint, o.Epochs()); group == "" && len(s.Jobs)+1 >= maxJobs {
			return Dataset{}, "", fmt.Errorf("%w: %d jobs exist, no room for the job and its share group", ErrLimit, len(s.Jobs))
		}
	}
	return ds, group, nil
}

// newDynamic is a new DYNAMIC job's lease bookkeeping: resumed from the
// command's checkpoint (waiting for the checkpoints of expect too),
// exactly-once, counting its loss, or at-most-once.
func newDynamic(b createJob, ds Dataset, expect []string) (*splits.DynamicState, error) {
	o := b.Options
	epochs := max(o.Epochs(), 0) // splits: 0 repeats forever
	switch {
	case b.Resume != nil:
		d := splits.NewDynamicResumed(ds.NumSplits, epochs, b.Resume.From)
		d.ExpectParts(expect)
		if _, err := d.AddPart(b.Resume.Part, b.Resume.Want, b.Resume.Delivered); err != nil {
			return nil, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Name, err)
		}
		return d, nil
	case o.Delivery() == jobspec.ExactlyOnce:
		return splits.NewDynamicExactlyOnce(ds.NumSplits, epochs), nil
	case b.CountLoss:
		return splits.NewDynamicCounted(ds.NumSplits, epochs), nil
	}
	return splits.NewDynamic(ds.NumSplits, epochs), nil
}

// staticWorkers sorts, dedupes and checks a STATIC job's worker list, and
// keeps the first maxWorkers (0: all).
func staticWorkers(in []string, maxWorkers int) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: a static job needs the list of workers agreed at creation", ErrInvalidCommand)
	}
	if len(in) > maxJobWorkers {
		return nil, fmt.Errorf("%w: %d static workers, limit %d", ErrLimit, len(in), maxJobWorkers)
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
