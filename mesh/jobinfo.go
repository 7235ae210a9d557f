package mesh

import (
	"sort"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/fsm"
)

// jobInfo converts the replicated job to its wire form, with each
// worker's current QUIC address from gossip.
func (n *Node) jobInfo(v fsm.JobView) api.JobInfo {
	addrs, status := map[string]string{}, map[string]string{}
	for _, m := range n.Members() {
		addrs[m.Name], status[m.Name] = m.Addr, m.Status
	}
	info := api.JobInfo{
		ID: v.ID, Name: v.Name, Fingerprint: v.Fingerprint,
		Options:   v.Options.Options(), // as stored: normalized, the job's alone
		CreatedAt: time.Unix(0, v.CreatedAt),
		Tracked:   v.Options.Delivery() == jobspec.ExactlyOnce || v.CountLoss,
		Tenant:    fsm.TenantOf(v.Owner),
	}
	if v.Owner != nil {
		info.Owner = v.Owner.Principal
	}
	if d, ok := n.raft.Dataset(v.Fingerprint); ok {
		info.NumSplits = d.NumSplits
	}
	for c := range v.Consumers {
		info.Consumers = append(info.Consumers, c)
		if m, ok := v.ConsumerMetrics[c]; ok {
			if info.ConsumerMetrics == nil {
				info.ConsumerMetrics = map[string]api.ConsumerMetrics{}
			}
			info.ConsumerMetrics[c] = api.ConsumerMetrics{BatchTimeSeconds: m.BatchTime, ResultQueue: m.ResultQueue, Stall: m.Stall, Batches: m.Batches, Workers: m.Workers}
		}
	}
	sort.Strings(info.Consumers)
	names := make([]string, 0, len(v.Workers))
	for w := range v.Workers {
		names = append(names, w)
	}
	if v.Options.Sharding() == jobspec.Static {
		names = v.StaticWorkers
	}
	sort.Strings(names)
	var held map[string]int
	if v.Dynamic != nil {
		held = v.Dynamic.Held()
	}
	for _, w := range names {
		st, assigned := v.Workers[w]
		if !assigned && v.Options.Sharding() == jobspec.Static && status[w] != api.StatusAlive && status[w] != api.StatusSuspect {
			// A STATIC job's workers are its StaticWorkers, fixed at
			// creation: none is assigned a task in the state machine
			// (plan.PlanJobWorkers leaves STATIC jobs alone), so
			// ExpireWorker, which expires the workers a job has, never
			// expires one, and its consumers waited for a dead worker's
			// share for ever (systemtest/compose). Gossip holding it gone
			// is its expiry: its share is lost, as a dead OFF worker's
			// copy is.
			st.Expired = true
		}
		info.Workers = append(info.Workers, api.WorkerInfo{Name: w, Addr: addrs[w], Expired: st.Expired, Incarnation: st.Incarnation,
			Drained: st.Drained, Dismissed: st.Dismissed, Since: st.Since, Held: held[w]})
	}
	info.ShareGroup = v.ShareGroup
	info.Autocache = n.autocacheInfo(v.Fingerprint)
	offloadInfo(&info, v)
	if sc := v.Scale; sc != nil {
		info.Scale = &api.ScaleInfo{Workers: sc.Workers, Phase: sc.Phase.String(), Reason: sc.Reason, Changes: sc.Changes,
			Wanted: v.WantedWorkers(), Share: sc.Allotted, Allocation: sc.Allocation}
	}
	if r := v.Rounds; r != nil {
		info.Rounds = &api.RoundsInfo{Changes: r.Schedule.Changes, Reached: r.Reached, Lookahead: fsm.RoundLookahead}
	}
	if g, ok := n.raft.Job(v.ShareGroup); ok && v.ShareGroup != "" {
		v.Progress = g.Progress // the group leases for the job
	}
	if p := v.Progress; p != nil {
		info.Epoch, info.Leased, info.Finished, info.Lost = p.Epoch, p.Total.Leased, p.Total.Finished, p.Total.Lost
		if x := p.Exact; x != nil {
			info.Exact = &api.ExactInfo{Delivered: x.Delivered, Requeued: x.Requeued, Orphaned: x.Orphaned, Duplicates: x.Duplicates, Abandoned: x.Abandoned,
				Departures: x.Departures, Skipped: x.Skipped, SettledBefore: x.SettledBefore,
				ResumeFrom: x.ResumeFrom, ResumeWant: x.ResumeWant, ResumeHave: x.ResumeHave,
				AtMostOnce: x.AtMostOnce, Lost: x.Lost, Censused: x.Censused}
		}
	}
	info.State, info.Failure = jobState(v)
	return info
}
