package plan

import (
	"maps"
	"slices"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// The leader's job upkeep, decided purely: which dead workers to expire,
// when to expire consumer leases, which jobs to garbage-collect and which
// live workers to assign. The mesh gathers the inputs (the clock, gossip's
// members, the replicated jobs) and applies the steps in order. What follows
// from a command inside the state machine (a share group following its
// jobs' workers, a coordinated job's rotation changing from an agreed future
// round on AssignTask and ExpireWorker, leases lost on expiry) is decided by
// the command handlers, not here.

// JobStep is one command of a job plan, with what it is about, so the
// caller can log it and handle its failure without decoding the body.
type JobStep struct {
	// Command is built by the New* constructors. At is left zero, as the
	// leader always proposed these: raftnode's Node.Apply stamps it.
	Command fsm.Command
	// Job is the job the command is about ("" for ExpireWorker and
	// ExpireConsumers, which reach every job).
	Job string
	// Worker is the worker it is about (ExpireWorker, AssignTask).
	Worker string
}

// gcDue is the leader's test for proposing GarbageCollectJob: without a
// consumer for more than GCAfter at now. It is stricter than the state machine's own test (which
// the command checks against its At, stamped at Apply, so never earlier
// than now): the command is not proposed to be rejected.
func gcDue(j *fsm.Job, now time.Time) bool {
	return j.NoConsumersSince != 0 && now.Sub(time.Unix(0, j.NoConsumersSince)) > j.Options.GCAfter()
}

// PlanJobs plans one pass of the leader's job upkeep at now, given gossip's
// members and every job (share groups included), as raftnode's Node.Jobs returns them.
// The steps, in the order to apply them:
//
//  1. ExpireWorker for each worker that gossip holds dead or left and that
//     is assigned and not expired in some job, once, in the order of the
//     first job (by name) that has it, then by name. A suspect member is
//     left alone. Then ExpireSuperseded for each other worker whose node
//     runs a newer process than the one that leased last in a job that
//     takes workers back, where that process still holds splits
//     (fsm.NewExpireSuperseded), once, in the same order.
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
func PlanJobs(now time.Time, members []JobMember, jobs []fsm.JobView) []JobStep {
	if len(jobs) == 0 {
		return nil
	}
	state := fsm.NewState()
	for _, v := range jobs {
		state.Jobs[v.Name] = v.Job.Clone()
	}
	steps := planExpiries(state, members)
	steps = append(steps, JobStep{Command: fsm.NewExpireConsumers(now.UnixNano())}) // 2.
	// What 1 and 2 do to the state, for 3. Neither can be rejected: the
	// worker names come from the state, and ExpireConsumers checks nothing.
	for _, st := range steps {
		_, _ = state.Apply(st.Command)
	}
	return append(steps, planUpkeep(now, state, members)...)
}

// planExpiries is step 1: ExpireWorker for the workers gossip holds gone,
// then ExpireSuperseded for those whose node runs a newer process.
func planExpiries(state *fsm.State, members []JobMember) []JobStep {
	gone := map[string]bool{}
	for _, m := range members {
		if m.gone() {
			gone[m.ID] = true
		}
	}
	// Decided on the jobs as given: an ExpireWorker expires its worker in
	// every job, so each is planned once.
	var steps []JobStep
	expired := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(state.Jobs)) {
		workers := state.Jobs[name].Workers
		for _, w := range slices.Sorted(maps.Keys(workers)) {
			if gone[w] && !workers[w].Expired && !expired[w] {
				expired[w] = true
				steps = append(steps, JobStep{Command: fsm.NewExpireWorker(w), Worker: w})
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
			if expired[w] || st.Expired || newer[w] <= st.Incarnation || !j.HoldsSuperseded(w, newer[w]-1) {
				continue
			}
			expired[w] = true
			steps = append(steps, JobStep{Command: fsm.NewExpireSuperseded(w, newer[w]-1), Worker: w})
		}
	}
	return steps
}

// planUpkeep is step 3, on the state as steps 1 and 2 leave it: the
// collections, then the allocations, then the assignments.
func planUpkeep(now time.Time, state *fsm.State, members []JobMember) []JobStep {
	var steps []JobStep
	// Jobs due are collected first, so that their nodes count as free.
	for _, name := range slices.Sorted(maps.Keys(state.Jobs)) {
		if j := state.Jobs[name]; !j.Group && gcDue(j, now) {
			steps = append(steps, JobStep{Command: fsm.NewGarbageCollectJob(name), Job: name})
			delete(state.Jobs, name) // what the step does, for what follows
		}
	}
	// Autoscaling jobs get the nodes allocateWorkers gives them
	// (allocate.go): the allocations, with their dismissals, first, then
	// the assignments, none of a node still draining a dismissal. The
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
