package raftstate

import (
	"fmt"
	"maps"
	"slices"
)

// The leader's allocation of nodes to autoscaling jobs, decided purely
// (PlanJobs step 3 applies it): every autoscaling job that runs wants the
// count its policy chose (Scale.Workers, capped by MaxWorkers), and
// AllocateWorkers turns the wants into nodes. While the wants fit the
// mesh, each node serves at most one autoscaling job; when they do not,
// the nodes are shared out max-min fairly (water-filling: each job gets
// min(want, level), the level raised until the nodes run out, so no job
// gets more than another that wants more), still one job per node; only
// when there are more autoscaling jobs than nodes does a node serve
// several, each job then getting one node, the least loaded. Jobs with a
// fixed count or all nodes (not autoscaling) run on every node as they
// always have, outside the allocation.
//
// A node the allocation takes from a job is released (AllocateJob,
// release.go) and given to another job only once it has drained its task:
// nodes still draining are left out of every assignment. The decision and
// its reason are recorded in the job (Scale.Share, Scale.Allocation) by the
// same AllocateJob, whenever they change.

// allocatable reports whether j takes part in the allocation: it
// autoscales, runs (neither finished nor failed, nor waiting for
// checkpoints) and is not a share group.
func allocatable(j *Job) bool {
	if j.Scale == nil || !rejoinable(j) || j.Failure != nil {
		return false
	}
	return !j.Dynamic.Complete() && !j.Dynamic.Waiting()
}

// planAllocation plans the AllocateJob steps of the allocatable jobs
// among nodes (the assignable members, sorted), and returns each job's
// allocated nodes.
func planAllocation(jobs map[string]*Job, nodes []string) (map[string][]string, []JobStep) {
	want := map[string]int{}
	current := map[string][]string{}
	for name, j := range jobs {
		if !allocatable(j) {
			continue
		}
		want[name] = max(j.scaledLimit(), 1)
		for w, st := range j.Workers {
			if !st.Expired && !st.Released {
				if _, ok := slices.BinarySearch(nodes, w); ok {
					current[name] = append(current[name], w)
				}
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	alloc := AllocateWorkers(want, nodes, current)
	total := 0
	for _, w := range want {
		total += w
	}
	var steps []JobStep
	for _, name := range slices.Sorted(maps.Keys(want)) {
		j := jobs[name]
		var release []string
		for _, w := range slices.Sorted(slices.Values(current[name])) {
			if !slices.Contains(alloc[name], w) {
				release = append(release, w)
			}
		}
		if len(release) > 0 && len(release) >= j.activeWorkers() {
			release = release[:len(release)-1] // one worker stays until its replacement is there
		}
		share := len(alloc[name])
		reason := fmt.Sprintf("%d of its own", share)
		switch {
		case len(want) > len(nodes):
			reason = fmt.Sprintf("node shared: %d autoscaling jobs on %d nodes", len(want), len(nodes))
		case share < want[name]:
			reason = fmt.Sprintf("fair share %d of %d wanted: the jobs want %d nodes, the mesh has %d", share, want[name], total, len(nodes))
		}
		if len(release) == 0 && j.Scale.Allocated && j.Scale.Share == share && j.Scale.Allocation == reason {
			continue
		}
		steps = append(steps, JobStep{Command: NewAllocateJob(name, share, reason, release), Job: name})
	}
	return alloc, steps
}

// busyNodes are the nodes still draining a task a job released: no job
// is assigned them until they have drained.
func busyNodes(jobs map[string]*Job) map[string]bool {
	busy := map[string]bool{}
	for _, j := range jobs {
		for w, st := range j.Workers {
			if st.releasing() {
				busy[w] = true
			}
		}
	}
	return busy
}

// planAllocated is planAssign for an allocated job: its allocated nodes
// that are not busy, a released and drained worker back through
// NewRejoinTask, a node new to the job through AssignTask, up to its
// count.
func planAllocated(job *Job, members []JobMember, allowed []string, busy map[string]bool) []JobStep {
	if job.Dynamic != nil && job.Dynamic.Waiting() {
		return nil
	}
	byID := map[string]JobMember{}
	for _, m := range members {
		byID[m.ID] = m
	}
	active := job.activeWorkers()
	var steps []JobStep
	for _, name := range slices.Sorted(slices.Values(allowed)) {
		if lim := job.scaledLimit(); lim > 0 && active >= lim {
			break
		}
		m, ok := byID[name]
		if busy[name] || !ok || !m.assignable() {
			continue
		}
		st, known := job.Workers[name]
		switch {
		case !known:
			steps = append(steps, JobStep{Command: NewAssignTask(job.Name, name), Job: job.Name, Worker: name})
		case st.Released && st.Drained && !st.Expired, (st.Drained || st.Expired) && m.Incarnation > st.Incarnation:
			steps = append(steps, JobStep{Command: NewRejoinTask(job.Name, name), Job: job.Name, Worker: name})
		default:
			continue // working on it, or out of it for good
		}
		active++
	}
	return steps
}

// WantedWorkers is how many workers an autoscaling job's policy wants
// now (Scale.Workers capped by MaxWorkers, at least 1; a job waiting for a
// node the mesh does not have counts it); 0 for a job that does not
// autoscale.
func (j *Job) WantedWorkers() int {
	if j.Scale == nil {
		return 0
	}
	w := max(j.scaledLimit(), 1)
	if j.Scale.WantsMore && (j.Options.MaxWorkers == 0 || w < j.Options.MaxWorkers) {
		w++
	}
	return w
}
