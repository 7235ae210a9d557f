package plan

import (
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/fsm"
)

// PlanJobWorkers plans the AssignTask steps that give job to every
// assignable member that has never worked on it, in name order, up to the
// job's MaxWorkers live workers. A worker expired from the job is out of it
// for good (fsm.NewAssignTask), even once gossip holds it alive again: its
// consumers dropped it. A STATIC job keeps the workers agreed at its
// creation, and a share group gets its workers through its jobs: neither
// gets a step. The steps are meant to be applied in order, stopping at the
// first that fails.
func PlanJobWorkers(members []JobMember, job fsm.JobView) []JobStep {
	return planAssign(&job.Job, members, nil)
}

// PlanJobWorkersAmong is PlanJobWorkers for a job among others (all the
// cluster's jobs): an autoscaling job takes the nodes that serve the
// fewest other autoscaling jobs first (autoscaleLoad), so that jobs that
// choose their worker count get nodes of their own while there are
// enough.
func PlanJobWorkersAmong(members []JobMember, job fsm.JobView, all []fsm.JobView) []JobStep {
	jobs := make([]*fsm.Job, 0, len(all))
	for i := range all {
		if all[i].Name != job.Name {
			jobs = append(jobs, &all[i].Job)
		}
	}
	return planAssign(&job.Job, members, autoscaleLoad(jobs))
}

// autoscaleLoad counts, per node, the autoscaling jobs it serves (as a
// worker neither expired nor drained).
func autoscaleLoad(jobs []*fsm.Job) map[string]int {
	load := map[string]int{}
	for _, j := range jobs {
		if j.Scale == nil {
			continue
		}
		for w, st := range j.Workers {
			if !st.Expired && !st.Drained {
				load[w]++
			}
		}
	}
	return load
}

// planAssign is PlanJobWorkers. A worker that drained or was expired, and
// whose node now runs a newer process, rejoins the job first
// (fsm.NewRejoinTask).
func planAssign(job *fsm.Job, members []JobMember, load map[string]int) []JobStep {
	if job.Group || job.Options.Sharding() == jobspec.Static || (job.Dynamic != nil && job.Dynamic.Waiting()) || job.RemoteOff() {
		return nil // a resumed job waiting for checkpoints gets workers once they are in
	}
	active := job.ActiveWorkers()
	var steps []JobStep
	for _, m := range members {
		st, ok := job.Workers[m.ID]
		if !ok || !(st.Drained || st.Expired) || !job.Rejoinable() || !m.assignable() || m.Incarnation <= st.Incarnation {
			continue
		}
		if st.Expired {
			if lim := job.ScaledLimit(); lim > 0 && active >= lim {
				continue
			}
			active++
		}
		steps = append(steps, JobStep{Command: fsm.NewRejoinTask(job.Name, m.ID), Job: job.Name, Worker: m.ID})
	}
	slices.SortFunc(steps, func(a, b JobStep) int { return strings.Compare(a.Worker, b.Worker) })
	steps = slices.CompactFunc(steps, func(a, b JobStep) bool { return a.Worker == b.Worker })
	candidates := AssignableWorkers(members, 0)
	if job.Scale != nil && load != nil {
		// The least loaded nodes first (by name among equals).
		slices.SortStableFunc(candidates, func(a, b string) int { return load[a] - load[b] })
	}
	for _, name := range candidates {
		if lim := job.ScaledLimit(); lim > 0 && active >= lim {
			break
		}
		if _, ok := job.Workers[name]; ok {
			continue // working on it, or expired from it for good
		}
		steps = append(steps, JobStep{Command: fsm.NewAssignTask(job.Name, name), Job: job.Name, Worker: name})
		active++
		if job.Scale != nil && load != nil {
			load[name]++
		}
	}
	return steps
}
