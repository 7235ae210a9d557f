package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// createJobBody is the body of TypeCreateJob.
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
	return newCommand(TypeCreateJob, v, createJobBody{Name: name, Fingerprint: fingerprint, Options: o, StaticWorkers: staticWorkers, Scale: start})
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
	return newCommand(TypeCreateJob, createJobVersion(o), createJobBody{Name: name, Fingerprint: fingerprint, Options: o, Resume: &r})
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

// applyCreateJob creates a job, or finds the one of that name, or
// replaces it by a job resumed from checkpoints. Its result is the job's
// ID. The steps check in the order the log has always been applied in: an
// older node rejects the same entries with the same errors.
func applyCreateJob(s *State, c Command) (any, error) {
	var b createJobBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	o, err := checkCreateJob(b, c.Version)
	if err != nil {
		return nil, err
	}
	var expect []string // a resume: consumers whose checkpoints it waits for, whatever the counts say
	if j, ok := s.Jobs[b.Name]; ok {
		id, replace, err := existingJob(j, b, o)
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
	ds, group, err := s.roomForJob(b, o)
	if err != nil {
		return nil, err
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
		if j.Dynamic, err = newDynamic(b, o, ds, expect); err != nil {
			return nil, err
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
		sc := autoscale.NewState()
		if st := b.Scale; st != nil {
			sc = warmScaleState(*st, o.MaxWorkers)
		}
		j.Scale = &sc
	}
	s.Jobs[b.Name] = j
	return j.ID, nil
}

// checkCreateJob checks what a CreateJob says on its own (its version,
// scale start, names and options) and returns its normalized options.
func checkCreateJob(b createJobBody, version uint16) (JobOptions, error) {
	if v := createJobVersion(b.Options); version < v {
		return JobOptions{}, fmt.Errorf("%w: CreateJob v%d cannot carry these options (autoscale needs v2, offload_boundary v4, count_loss v5; want v%d)", ErrInvalidCommand, version, v)
	}
	if st := b.Scale; st != nil {
		switch {
		case version < 3:
			return JobOptions{}, fmt.Errorf("%w: CreateJob v%d cannot carry a scale start (v3)", ErrInvalidCommand, version)
		case !b.Options.Autoscale:
			return JobOptions{}, fmt.Errorf("%w: job %q: a scale start is for autoscaling jobs", ErrInvalidCommand, b.Name)
		case st.Workers < 1 || st.Workers > maxJobWorkers:
			return JobOptions{}, fmt.Errorf("%w: job %q: scale start at %d workers (want 1..%d)", ErrInvalidCommand, b.Name, st.Workers, maxJobWorkers)
		}
		if err := checkName("scale start's job name", st.From); err != nil {
			return JobOptions{}, err
		}
	}
	if err := checkName("job name", b.Name); err != nil {
		return JobOptions{}, err
	}
	if err := checkName("dataset fingerprint", b.Fingerprint); err != nil {
		return JobOptions{}, err
	}
	o := b.Options.Normalized()
	if err := o.validate(); err != nil {
		return JobOptions{}, err
	}
	if b.Resume != nil && (o.Sharding != splits.Dynamic || o.Delivery != DeliveryExactlyOnce || o.Share) {
		return JobOptions{}, fmt.Errorf("%w: job %q: only exactly-once DYNAMIC jobs without share resume from checkpoints", ErrInvalidCommand, b.Name)
	}
	return o, nil
}

// existingJob decides a CreateJob for a name that has job j: its ID (a
// retry, a consumer joining, a checkpoint the resumed job waits for), an
// error, or replace: a resume replaces j.
func existingJob(j *Job, b createJobBody, o JobOptions) (id any, replace bool, err error) {
	d := j.Options.diff(o)
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
			ErrJobInUse, b.Name, j.ID, len(j.Consumers), j.Options.ConsumerTTL)
	}
	return nil, true, nil
}

// roomForJob checks that a new job may be created: its name, its
// dataset, the bounds, and room for a share group if it needs a new one
// (group: the share group it joins, "" if none or a new one).
func (s *State) roomForJob(b createJobBody, o JobOptions) (ds Dataset, group string, err error) {
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
	if o.Share && o.Sharding == splits.Dynamic {
		if group = s.findShareGroup(ds.Fingerprint, o.Epochs); group == "" && len(s.Jobs)+1 >= maxJobs {
			return Dataset{}, "", fmt.Errorf("%w: %d jobs exist, no room for the job and its share group", ErrLimit, len(s.Jobs))
		}
	}
	return ds, group, nil
}

// newDynamic is a new DYNAMIC job's lease bookkeeping: resumed from the
// command's checkpoint (waiting for the checkpoints of expect too),
// exactly-once, counting its loss, or at-most-once.
func newDynamic(b createJobBody, o JobOptions, ds Dataset, expect []string) (*splits.DynamicState, error) {
	epochs := max(o.Epochs, 0) // splits: 0 repeats forever
	switch {
	case b.Resume != nil:
		d := splits.NewDynamicResumed(ds.NumSplits, epochs, b.Resume.From)
		d.ExpectParts(expect)
		if _, err := d.AddPart(b.Resume.Part, b.Resume.Want, b.Resume.Delivered); err != nil {
			return nil, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Name, err)
		}
		return d, nil
	case o.Delivery == DeliveryExactlyOnce:
		return splits.NewDynamicExactlyOnce(ds.NumSplits, epochs), nil
	case o.CountLoss:
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
