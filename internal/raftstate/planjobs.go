package raftstate

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// The leader's job upkeep, decided purely: which dead workers to expire,
// when to expire consumer leases, which jobs to garbage-collect and which
// live workers to assign. The mesh gathers the inputs (the clock, gossip's
// members, the replicated jobs) and applies the steps in order. What follows
// from a command inside the state machine (a share group following its
// jobs' workers, a coordinated job's rotation changing from an agreed future
// round on AssignTask and ExpireWorker, leases lost on expiry) is decided by
// the command handlers, not here.

// MemberStatus is gossip's verdict on a member.
type MemberStatus uint8

// Member statuses. The zero value is unknown: such a member is neither
// given tasks nor expired.
const (
	MemberAlive MemberStatus = iota + 1
	MemberSuspect
	MemberDead
	MemberLeft
)

// String names the status as gossip does.
func (s MemberStatus) String() string {
	switch s {
	case MemberAlive:
		return "alive"
	case MemberSuspect:
		return "suspect"
	case MemberDead:
		return "dead"
	case MemberLeft:
		return "left"
	}
	return "unknown"
}

// JobMember is gossip's view of one node, the member input of PlanJobs.
type JobMember struct {
	// ID is the node name, the worker id in jobs.
	ID string
	// Addr is its QUIC address; empty until its metadata arrived.
	Addr string
	// Status is gossip's verdict.
	Status MemberStatus
	// Worker: the node runs tasks (false for control-only nodes).
	Worker bool
	// Incarnation is the member's process (its start time, from gossip;
	// 0 if it does not say): a drained worker rejoins its jobs from a
	// newer one.
	Incarnation uint64
}

// assignable: gossip holds it alive (a suspect gets nothing new), it has an
// address to be reached at and it runs tasks.
func (m JobMember) assignable() bool { return m.Status == MemberAlive && m.Addr != "" && m.Worker }

// gone: the member died or left; its tasks are expired.
func (m JobMember) gone() bool { return m.Status == MemberDead || m.Status == MemberLeft }

// JobStep is one command of a job plan, with what it is about, so the
// caller can log it and handle its failure without decoding the body.
type JobStep struct {
	// Command is built by the New* constructors. At is left zero, as the
	// leader always proposed these: Node.Apply stamps it.
	Command Command
	// Job is the job the command is about ("" for ExpireWorker and
	// ExpireConsumers, which reach every job).
	Job string
	// Worker is the worker it is about (ExpireWorker, AssignTask).
	Worker string
}

// AssignableWorkers lists, sorted and without duplicates, the members that
// may be given a task: alive (not suspect), with an address, running tasks.
// At most max of them (0: all), the first by name; a STATIC job is created
// over this list.
func AssignableWorkers(members []JobMember, max int) []string {
	var out []string
	for _, m := range members {
		if m.assignable() {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}

// PlanJobWorkers plans the AssignTask steps that give job to every
// assignable member that has never worked on it, in name order, up to the
// job's MaxWorkers live workers. A worker expired from the job is out of it
// for good (NewAssignTask), even once gossip holds it alive again: its
// consumers dropped it. A STATIC job keeps the workers agreed at its
// creation, and a share group gets its workers through its jobs: neither
// gets a step. The steps are meant to be applied in order, stopping at the
// first that fails.
func PlanJobWorkers(members []JobMember, job JobView) []JobStep {
	return planAssign(&job.Job, members, nil)
}

// PlanJobWorkersAmong is PlanJobWorkers for a job among others (all the
// cluster's jobs): an autoscaling job takes the nodes that serve the
// fewest other autoscaling jobs first (autoscaleLoad), so that jobs that
// choose their worker count get nodes of their own while there are
// enough.
func PlanJobWorkersAmong(members []JobMember, job JobView, all []JobView) []JobStep {
	jobs := make([]*Job, 0, len(all))
	for i := range all {
		if all[i].Name != job.Name {
			jobs = append(jobs, &all[i].Job)
		}
	}
	return planAssign(&job.Job, members, autoscaleLoad(jobs))
}

// autoscaleLoad counts, per node, the autoscaling jobs it serves (as a
// worker neither expired nor drained).
func autoscaleLoad(jobs []*Job) map[string]int {
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
// (NewRejoinTask).
func planAssign(job *Job, members []JobMember, load map[string]int) []JobStep {
	if job.Group || job.Options.Sharding == splits.Static || (job.Dynamic != nil && job.Dynamic.Waiting()) || job.remoteOff() {
		return nil // a resumed job waiting for checkpoints gets workers once they are in
	}
	active := job.activeWorkers()
	var steps []JobStep
	for _, m := range members {
		st, ok := job.Workers[m.ID]
		if !ok || !(st.Drained || st.Expired) || !rejoinable(job) || !m.assignable() || m.Incarnation <= st.Incarnation {
			continue
		}
		if st.Expired {
			if lim := job.scaledLimit(); lim > 0 && active >= lim {
				continue
			}
			active++
		}
		steps = append(steps, JobStep{Command: NewRejoinTask(job.Name, m.ID), Job: job.Name, Worker: m.ID})
	}
	slices.SortFunc(steps, func(a, b JobStep) int { return strings.Compare(a.Worker, b.Worker) })
	steps = slices.CompactFunc(steps, func(a, b JobStep) bool { return a.Worker == b.Worker })
	candidates := AssignableWorkers(members, 0)
	if job.Scale != nil && load != nil {
		// The least loaded nodes first (by name among equals).
		slices.SortStableFunc(candidates, func(a, b string) int { return load[a] - load[b] })
	}
	for _, name := range candidates {
		if lim := job.scaledLimit(); lim > 0 && active >= lim {
			break
		}
		if _, ok := job.Workers[name]; ok {
			continue // working on it, or expired from it for good
		}
		steps = append(steps, JobStep{Command: NewAssignTask(job.Name, name), Job: job.Name, Worker: name})
		active++
		if job.Scale != nil && load != nil {
			load[name]++
		}
	}
	return steps
}

// gcDue is the leader's test for proposing GarbageCollectJob: without a
// consumer for more than GCAfter at now. It is stricter than Job.GCDue (which
// the command checks against its At, stamped at Apply, so never earlier
// than now): the command is not proposed to be rejected.
func gcDue(j *Job, now time.Time) bool {
	return j.NoConsumersSince != 0 && now.Sub(time.Unix(0, j.NoConsumersSince)) > j.Options.GCAfter
}

// PlanJobs plans one pass of the leader's job upkeep at now, given gossip's
// members and every job (share groups included), as Node.Jobs returns them.
// The steps, in the order to apply them:
//
//  1. ExpireWorker for each worker that gossip holds dead or left and that
//     is assigned and not expired in some job, once, in the order of the
//     first job (by name) that has it, then by name. A suspect member is
//     left alone. Then ExpireSuperseded for each other worker whose node
//     runs a newer process than the one that leased last in a job that
//     takes workers back, where that process still holds splits
//     (NewExpireSuperseded), once, in the same order.
//  2. ExpireConsumers(now), whenever there is a job at all.
//  3. Then, per job by name, share groups skipped (they go with their last
//     job and get workers through their jobs), on the state as 1 and 2
//     leave it: GarbageCollectJob if the job has been without consumers
//     for more than its GCAfter at now; otherwise the AssignTask steps of
//     PlanJobWorkers.
//
// Step 3 sees the effect of steps 1 and 2 (a dead worker no longer counts
// toward MaxWorkers; a consumer whose lease ran out no longer keeps the job
// alive) because they are applied, purely, to a copy of the jobs. The
// caller applies every step in order and goes on after a failure, except
// that a failed AssignTask ends the assignments of its job; a step the state
// no longer allows when it commits (a consumer attached meanwhile) is
// rejected by the state machine, which checks every rule again. The output
// depends only on the inputs, not on their order.
func PlanJobs(now time.Time, members []JobMember, jobs []JobView) []JobStep {
	if len(jobs) == 0 {
		return nil
	}
	state := NewState()
	for _, v := range jobs {
		state.Jobs[v.Name] = v.Job.clone()
	}
	gone := map[string]bool{}
	for _, m := range members {
		if m.gone() {
			gone[m.ID] = true
		}
	}

	// 1. Decided on the jobs as given: an ExpireWorker expires its
	// worker in every job, so each is planned once.
	var steps []JobStep
	expired := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(state.Jobs)) {
		workers := state.Jobs[name].Workers
		for _, w := range slices.Sorted(maps.Keys(workers)) {
			if gone[w] && !workers[w].Expired && !expired[w] {
				expired[w] = true
				steps = append(steps, JobStep{Command: NewExpireWorker(w), Worker: w})
			}
		}
	}
	// 1b. A worker whose node runs a newer process than the one that
	// leased in a job that takes workers back, where the old process
	// still holds splits, and that gossip never held gone (a restart
	// quicker than its detection): the old process is expired there, and
	// its rejoin is planned in 3. Once rejoined it holds nothing, so this
	// does not repeat.
	newer := map[string]uint64{}
	for _, m := range members {
		if !m.gone() && m.Incarnation != 0 {
			newer[m.ID] = m.Incarnation
		}
	}
	for _, name := range slices.Sorted(maps.Keys(state.Jobs)) {
		j := state.Jobs[name]
		for _, w := range slices.Sorted(maps.Keys(j.Workers)) {
			st := j.Workers[w]
			if expired[w] || st.Expired || newer[w] <= st.Incarnation || !holdsSuperseded(j, w, st, newer[w]-1) {
				continue
			}
			expired[w] = true
			steps = append(steps, JobStep{Command: NewExpireSuperseded(w, newer[w]-1), Worker: w})
		}
	}
	steps = append(steps, JobStep{Command: NewExpireConsumers(now.UnixNano())}) // 2.
	// What 1 and 2 do to the state, for 3. Neither can be rejected: the
	// worker names come from the state, and ExpireConsumers checks nothing.
	for _, st := range steps {
		_, _ = state.Apply(st.Command)
	}

	// 3. Jobs due are collected first, so that their nodes count as free.
	for _, name := range slices.Sorted(maps.Keys(state.Jobs)) {
		if j := state.Jobs[name]; !j.Group && gcDue(j, now) {
			steps = append(steps, JobStep{Command: NewGarbageCollectJob(name), Job: name})
			delete(state.Jobs, name) // what the step does, for what follows
		}
	}
	// Autoscaling jobs get the nodes AllocateWorkers gives them
	// (allocate.go): the allocations, with their releases, first, then
	// the assignments, none of a node still draining a release. The
	// others take every node, as before, up to MaxWorkers.
	alloc, allocSteps := planAllocation(state.Jobs, AssignableWorkers(members, 0))
	for _, st := range allocSteps {
		if _, err := state.Apply(st.Command); err == nil {
			steps = append(steps, st)
		}
	}
	busy := busyNodes(state.Jobs)
	for _, name := range slices.Sorted(maps.Keys(state.Jobs)) {
		j := state.Jobs[name]
		if j.Group {
			continue
		}
		if nodes, ok := alloc[name]; ok {
			steps = append(steps, planAllocated(j, members, nodes, busy)...)
			continue
		}
		steps = append(steps, planAssign(j, members, nil)...)
	}
	return steps
}
