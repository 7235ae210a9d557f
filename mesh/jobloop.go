package mesh

import (
	"context"
	"errors"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/internal/raftnode"
)

// liveWorkers lists the members that may be given a task, sorted, at most
// max (0: all), as plan.AssignableWorkers decides.
func (n *Node) liveWorkers(max int) []string {
	return plan.AssignableWorkers(jobMembers(n.Members()), max)
}

// jobMembers is gossip's view of the members, as the job planner takes it.
func jobMembers(ms []api.Member) []plan.JobMember {
	out := make([]plan.JobMember, 0, len(ms))
	for _, m := range ms {
		jm := plan.JobMember{ID: m.Name, Addr: m.Addr, Worker: m.Worker, Incarnation: m.Incarnation}
		switch m.Status {
		case api.StatusAlive:
			jm.Status = plan.MemberAlive
		case api.StatusSuspect:
			jm.Status = plan.MemberSuspect
		case api.StatusDead:
			jm.Status = plan.MemberDead
		case api.StatusLeft:
			jm.Status = plan.MemberLeft
		}
		out = append(out, jm)
	}
	return out
}

// assignWorkers gives job to every live member not yet working on it, up
// to MaxWorkers, as plan.PlanJobWorkers decides. STATIC jobs keep the
// workers agreed at creation.
func (n *Node) assignWorkers(ctx context.Context, job string) {
	view, ok := n.raft.Job(job)
	if !ok {
		return
	}
	n.applyJobSteps(ctx, plan.PlanJobWorkersAmong(jobMembers(n.Members()), view, n.raft.Jobs()))
}

// jobLoop runs on the leader: it assigns new members to jobs, expires dead
// workers (their unfinished splits are lost: at-most-once), expires
// consumers whose lease ran out and garbage-collects jobs nobody reads, as
// plan.PlanJobs decides.
func (n *Node) jobLoop() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.ReconcileInterval)
	defer ticker.Stop()
	unread := map[string]time.Time{} // collectDatasets' memory, this loop's own
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-ticker.C:
		}
		if !n.raft.IsLeader() {
			clear(unread)
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
		n.reconcileJobs(ctx)
		n.collectDatasets(ctx, time.Now(), unread)
		cancel()
	}
}

// reconcileJobs gathers the planner's inputs and applies its plan.
func (n *Node) reconcileJobs(ctx context.Context) {
	jobs := n.raft.Jobs()
	if len(jobs) == 0 {
		return // nothing to plan; spare the member list
	}
	n.applyJobSteps(ctx, plan.PlanJobs(time.Now(), jobMembers(n.Members()), jobs))
}

// applyJobSteps applies a job plan in order. A failure is logged and the
// rest goes on, except that a failed AssignTask ends its job's assignments
// (the job may be at its MaxWorkers, or gone). The state machine checks
// every rule again, so a step overtaken by another request (a consumer that
// attached since the plan, say) is rejected there and logged here.
//
// The steps are submitted together (raftnode.ApplyEach: one after
// another in the log, but not each waiting for the one before to commit),
// so a plan of one AssignTask per worker costs about one Raft round trip,
// not one per worker. Once an AssignTask of a job fails, the job's later
// ones (already submitted, and rejected by the state machine for the same
// reason) are not logged.
func (n *Node) applyJobSteps(ctx context.Context, steps []plan.JobStep) {
	if len(steps) == 0 {
		return
	}
	cmds := make([]fsm.Command, len(steps))
	for i, st := range steps {
		cmds[i] = st.Command
	}
	_, errs := n.raft.ApplyEach(ctx, cmds)
	var stopped map[string]bool // jobs whose assignments failed
	for i, st := range steps {
		if st.Command.Type == fsm.TypeAssignTask && stopped[st.Job] {
			continue
		}
		err := errs[i]
		switch st.Command.Type {
		case fsm.TypeExpireWorker:
			switch {
			case err != nil:
				n.log.Warn("expire worker", "worker", st.Worker, "err", err)
			case st.Command.Version >= 2:
				n.log.Info("expired a restarted worker's old process (a restart quicker than gossip saw)", "worker", st.Worker)
			default:
				n.log.Info("expired dead worker", "worker", st.Worker)
			}
		case fsm.TypeExpireConsumers:
			if err != nil {
				n.log.Warn("expire consumers", "err", err)
			}
		case fsm.TypeGarbageCollectJob:
			if err != nil {
				n.log.Warn("garbage-collect job", "job", st.Job, "err", err)
			} else {
				n.log.Info("garbage-collected job with no consumers", "job", st.Job)
			}
		case fsm.TypeAssignTask:
			if err != nil {
				n.log.Warn("assign task", "job", st.Job, "worker", st.Worker, "err", err)
				if stopped == nil {
					stopped = map[string]bool{}
				}
				stopped[st.Job] = true
			}
		case fsm.TypeAllocateJob:
			if err != nil {
				n.log.Warn("allocate nodes to an autoscaling job", "job", st.Job, "err", err)
			} else {
				n.log.Info("allocated nodes to an autoscaling job", "job", st.Job)
			}
		case fsm.TypeDrainTask:
			if err != nil {
				n.log.Warn("rejoin a drained worker to its job", "job", st.Job, "worker", st.Worker, "err", err)
			} else {
				n.log.Info("drained worker rejoins its job", "job", st.Job, "worker", st.Worker)
			}
		default:
			if err != nil {
				n.log.Warn("job upkeep", "command", st.Command.Type, "job", st.Job, "worker", st.Worker, "err", err)
			}
		}
	}
}

// errorsIsRejected reports an FSM rejection (a command that was valid CBOR
// but broke a rule: bad options, unknown job).
func errorsIsRejected(err error) bool { return errors.Is(err, raftnode.ErrRejected) }
