package fsm

import (
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// JobView is a deep copy of a job for readers outside the FSM, with the
// DYNAMIC progress computed.
type JobView struct {
	Job
	// Progress is the DYNAMIC lease progress; nil for other policies.
	Progress *splits.Progress `json:"progress,omitempty"`
}

func viewOf(j *Job) JobView {
	v := JobView{Job: *j.Clone()}
	if j.Dynamic != nil {
		p := j.Dynamic.Progress()
		v.Progress = &p
	}
	return v
}

// Job returns a copy of the named job.
func (s *State) Job(name string) (JobView, bool) {
	j, ok := s.Jobs[name]
	if !ok {
		return JobView{}, false
	}
	return viewOf(j), true
}

// JobList returns copies of every job, sorted by name.
func (s *State) JobList() []JobView {
	out := make([]JobView, 0, len(s.Jobs))
	for _, name := range slices.Sorted(maps.Keys(s.Jobs)) {
		out = append(out, viewOf(s.Jobs[name]))
	}
	return out
}

// Job states (Job.State).
const (
	// JobRunning: not finished, not failed.
	JobRunning = "running"
	// JobFinished: DYNAMIC, every split of every epoch handed out and
	// each finished or lost; OFF and STATIC, every live worker's task
	// has ended.
	JobFinished = "finished"
	// JobFailed: a worker's task failed (Job.Failure).
	JobFailed = "failed"
)

// State is the job's state: JobFailed once a task failed; JobFinished
// once its data has ended (see the constants); JobRunning otherwise. A job
// with no live worker has not finished: it waits for one.
func (v JobView) State() string {
	switch {
	case v.Failure != nil:
		return JobFailed
	case v.Progress != nil:
		if v.Progress.Complete {
			return JobFinished
		}
		return JobRunning
	}
	live := v.liveWorkers()
	for _, w := range live {
		if !v.Workers[w].Ended {
			return JobRunning
		}
	}
	if len(live) == 0 {
		return JobRunning
	}
	return JobFinished
}

// Admits reports whether a CreateJob of c would find this job the same
// (dataset and options, count_loss included), as CreateJob decides
// before anything else: a resume that would be refused for its options
// must change nothing before it is (mesh fences consumers for a resume).
func (v JobView) Admits(c Create) bool {
	return v.Fingerprint == c.Fingerprint && len(optionsDiff(v.Options, v.CountLoss, c.Options, c.CountLoss)) == 0
}
