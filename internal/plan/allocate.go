package plan

import (
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// The leader's allocation of nodes to autoscaling jobs, decided purely
// (PlanJobs step 3 applies it): every autoscaling job that runs wants the
// count its policy chose (Scale.Workers, capped by MaxWorkers), and
// allocateWorkers turns the wants into nodes. While the wants fit the
// mesh, each node serves at most one autoscaling job; when they do not,
// the nodes are shared out max-min fairly (water-filling: each job gets
// min(want, level), the level raised until the nodes run out, so no job
// gets more than another that wants more), still one job per node; only
// when there are more autoscaling jobs than nodes does a node serve
// several, each job then getting one node, the least loaded. Jobs with a
// fixed count or all nodes (not autoscaling) run on every node as they
// always have, outside the allocation.
//
// A node the allocation takes from a job is dismissed (fsm.NewAllocateJob)
// and given to another job only once it has drained its task:
// nodes still draining are left out of every assignment. The decision and
// its reason are recorded in the job (Scale.Share, Scale.Allocation) by the
// same AllocateJob, whenever they change.

// allocatable reports whether j takes part in the allocation: it
// autoscales, runs (neither finished nor failed, nor waiting for
// checkpoints) and is not a share group.
func allocatable(j *fsm.Job) bool {
	if j.Scale == nil || !j.Rejoinable() || j.Failure != nil {
		return false
	}
	return !j.Dynamic.Complete() && !j.Dynamic.Waiting()
}

// planAllocation plans the AllocateJob steps of the allocatable jobs
// among nodes (the assignable members, sorted), and returns each job's
// allocated nodes.
func planAllocation(jobs map[string]*fsm.Job, nodes []string) (map[string][]string, []JobStep) {
	want := map[string]int{}
	current := map[string][]string{}
	for name, j := range jobs {
		if !allocatable(j) {
			continue
		}
		want[name] = max(j.ScaledLimit(), 1)
		for w, st := range j.Workers {
			if !st.Expired && !st.Dismissed {
				if _, ok := slices.BinarySearch(nodes, w); ok {
					current[name] = append(current[name], w)
				}
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	alloc := allocateWorkers(want, nodes, current)
	total := 0
	for _, w := range want {
		total += w
	}
	var steps []JobStep
	for _, name := range slices.Sorted(maps.Keys(want)) {
		j := jobs[name]
		var dismiss []string
		for _, w := range slices.Sorted(slices.Values(current[name])) {
			if !slices.Contains(alloc[name], w) {
				dismiss = append(dismiss, w)
			}
		}
		if len(dismiss) > 0 && len(dismiss) >= j.ActiveWorkers() {
			dismiss = dismiss[:len(dismiss)-1] // one worker stays until its replacement is there
		}
		share := len(alloc[name])
		reason := fmt.Sprintf("%d of its own", share)
		switch {
		case len(want) > len(nodes):
			reason = fmt.Sprintf("node shared: %d autoscaling jobs on %d nodes", len(want), len(nodes))
		case share < want[name]:
			reason = fmt.Sprintf("fair share %d of %d wanted: the jobs want %d nodes, the mesh has %d", share, want[name], total, len(nodes))
		}
		if len(dismiss) == 0 && j.Scale.Allocated && j.Scale.Allotted == share && j.Scale.Allocation == reason {
			continue
		}
		steps = append(steps, JobStep{Command: fsm.NewAllocateJob(name, share, reason, dismiss), Job: name})
	}
	return alloc, steps
}

// busyNodes are the nodes still draining a task a job dismissed: no job
// is assigned them until they have drained.
func busyNodes(jobs map[string]*fsm.Job) map[string]bool {
	busy := map[string]bool{}
	for _, j := range jobs {
		for w, st := range j.Workers {
			if st.Dismissing() {
				busy[w] = true
			}
		}
	}
	return busy
}

// planAllocated is planAssign for an allocated job: its allocated nodes
// that are not busy, a dismissed and drained worker back through
// fsm.NewRejoinTask, a node new to the job through AssignTask, up to its
// count.
func planAllocated(job *fsm.Job, members []JobMember, allowed []string, busy map[string]bool) []JobStep {
	if job.Dynamic != nil && job.Dynamic.Waiting() {
		return nil
	}
	byID := map[string]JobMember{}
	for _, m := range members {
		byID[m.ID] = m
	}
	active := job.ActiveWorkers()
	var steps []JobStep
	for _, name := range slices.Sorted(slices.Values(allowed)) {
		if lim := job.ScaledLimit(); lim > 0 && active >= lim {
			break
		}
		m, ok := byID[name]
		if busy[name] || !ok || !m.assignable() {
			continue
		}
		st, known := job.Workers[name]
		switch {
		case !known:
			steps = append(steps, JobStep{Command: fsm.NewAssignTask(job.Name, name), Job: job.Name, Worker: name})
		case st.Dismissed && st.Drained && !st.Expired, (st.Drained || st.Expired) && m.Incarnation > st.Incarnation:
			steps = append(steps, JobStep{Command: fsm.NewRejoinTask(job.Name, name), Job: job.Name, Worker: name})
		default:
			continue // working on it, or out of it for good
		}
		active++
	}
	return steps
}

// allocateWorkers assigns worker nodes to jobs: want is each job's worker
// count (autoscale.Step's), nodes the live worker nodes, current each job's
// nodes now. It keeps current assignments where it can (a node moves only
// when its job wants fewer, or another job's fair share needs it).
//
// While the jobs want no more nodes than there are, each node serves at
// most one job and each job gets what it wants. When they want more, the
// nodes are shared out max-min fairly (water-filling: no job gets more
// than it wants, and no job gets more than another that wants more) and
// still each node serves one job; only when there are more jobs than nodes
// does a node serve several, every job then getting one node, the least
// loaded. A job that wants 0 gets none. Jobs are returned sorted, each
// with its nodes sorted.
func allocateWorkers(want map[string]int, nodes []string, current map[string][]string) map[string][]string {
	jobs := slices.Sorted(maps.Keys(want))
	live := slices.Sorted(slices.Values(nodes))
	live = slices.Compact(live)
	out := make(map[string][]string, len(jobs))
	if len(live) == 0 {
		for _, j := range jobs {
			out[j] = nil
		}
		return out
	}
	var active []string
	for _, j := range jobs {
		if want[j] > 0 {
			active = append(active, j)
		} else {
			out[j] = nil
		}
	}
	if len(active) > len(live) {
		// Fewer nodes than jobs: one node each, nodes shared, the least
		// loaded first (a job keeps a current node if it has one).
		load := map[string]int{}
		for _, j := range active {
			if n := firstLive(current[j], live); n != "" {
				out[j] = []string{n}
				load[n]++
			}
		}
		for _, j := range active {
			if out[j] != nil {
				continue
			}
			best := live[0]
			for _, n := range live {
				if load[n] < load[best] {
					best = n
				}
			}
			out[j] = []string{best}
			load[best]++
		}
		return out
	}
	share := waterFill(active, want, len(live))
	used := map[string]bool{}
	for _, j := range active {
		var keep []string
		for _, n := range slices.Sorted(slices.Values(current[j])) {
			if len(keep) < share[j] && slices.Contains(live, n) && !used[n] {
				keep = append(keep, n)
				used[n] = true
			}
		}
		out[j] = keep
	}
	for _, j := range active {
		for _, n := range live {
			if len(out[j]) >= share[j] {
				break
			}
			if !used[n] {
				out[j] = append(out[j], n)
				used[n] = true
			}
		}
		slices.Sort(out[j])
	}
	return out
}

// waterFill shares n nodes among jobs max-min fairly, each at least 1 and
// at most what it wants (len(jobs) <= n).
func waterFill(jobs []string, want map[string]int, n int) map[string]int {
	share := make(map[string]int, len(jobs))
	left := n
	open := slices.Clone(jobs)
	for len(open) > 0 && left > 0 {
		level := max(left/len(open), 1)
		var still []string
		for _, j := range open {
			give := min(want[j]-share[j], level, left)
			share[j] += give
			left -= give
			if share[j] < want[j] {
				still = append(still, j)
			}
		}
		open = still // each round gives at least one node while any is left
	}
	return share
}

func firstLive(ns []string, live []string) string {
	for _, n := range slices.Sorted(slices.Values(ns)) {
		if slices.Contains(live, n) {
			return n
		}
	}
	return ""
}
