package observe

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/feedmesh/feedmesh/mesh"
)

// collector reads a node's counters on every scrape.
type collector struct {
	n *mesh.Node
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("feedmesh_"+name, help, labels, nil)
}

var (
	dInfo          = desc("node_info", "This node: its name, version and QUIC address (value 1).", "name", "version", "addr")
	dMembers       = desc("members", "Members by status as this node's gossip sees them.", "status")
	dRaftLeader    = desc("raft_leader", "1 if this node is the Raft leader.")
	dRaftState     = desc("raft_state", "This node's Raft state (value 1 on its state).", "state")
	dRaftTerm      = desc("raft_term", "This node's current Raft term.")
	dRaftCommit    = desc("raft_commit_index", "The highest log index this node knows committed.")
	dRaftApplied   = desc("raft_applied_index", "The highest log index this node's state machine applied.")
	dRaftLastLog   = desc("raft_last_log_index", "The last index in this node's log.")
	dRaftLag       = desc("raft_apply_lag_entries", "Committed entries this node's state machine has not applied yet.")
	dRaftVoters    = desc("raft_voters", "Voters in the Raft configuration as this node knows it.")
	dRaftCommands  = desc("raft_commands_applied_total", "Commands this node's state machine applied, by type.", "command")
	dRaftApply     = desc("raft_apply_seconds", "Time from proposing a command on this node (as leader) to the state machine's answer.")
	dJobs          = desc("jobs", "Jobs by state (this node's replica of the cluster state).", "state")
	dJobConsumers  = desc("job_consumers", "Consumers attached to the job.", "job")
	dJobWorkers    = desc("job_workers", "Workers serving the job (not expired, drained or dismissed by autoscaling).", "job")
	dJobWanted     = desc("job_workers_wanted", "Workers the autoscaling job's policy wants (autoscaling jobs only).", "job")
	dNodesWanted   = desc("mesh_nodes_wanted", "Nodes the jobs would want (as tf.data service's optimal_number_of_workers): what the autoscaling jobs want, summed, and at least the largest fixed worker count. From this node's replica: current on the leader, 0 on a node without one. For an external autoscaler: compare with feedmesh_mesh_worker_nodes.")
	dWorkerNodes   = desc("mesh_worker_nodes", "Alive (or suspect) members that run tasks, as this node's gossip sees them.")
	dJobEpoch      = desc("job_epoch", "The job's current epoch (0-based).", "job")
	dJobSplits     = desc("job_splits", "Splits per epoch of the job's dataset (DYNAMIC jobs).", "job")
	dJobLeased     = desc("job_splits_leased_total", "Split leases handed out for the job (DYNAMIC).", "job")
	dJobFinished   = desc("job_splits_finished_total", "Leased splits the job's workers finished (DYNAMIC).", "job")
	dJobLost       = desc("job_splits_lost_total", "Leased splits lost with their worker (DYNAMIC, at most once).", "job")
	dTaskBatches   = desc("task_batches_total", "Batches this node's task of the job encoded and queued for consumers.", "job")
	dTaskBytes     = desc("task_bytes_total", "Encoded bytes of those batches (0 for coordinated jobs).", "job")
	dTaskQueued    = desc("task_queued_batches", "Batches of the job waiting on this node for a consumer.", "job")
	dOpElements    = desc("op_elements_total", "Elements the op produced on this node (a batch counts as one).", "job", "op", "index")
	dOpBytes       = desc("op_bytes_total", "Bytes of the elements the op produced on this node.", "job", "op", "index")
	dOpBusy        = desc("op_busy_seconds_total", "The op's own work on this node (summed over a parallel map's workers).", "job", "op", "index")
	dOpStall       = desc("op_stall_seconds_total", "Time the op's consumer waited on it beyond its own input: its cost on the critical path.", "job", "op", "index")
	dOpWait        = desc("op_wait_seconds_total", "Time the op waited on its input (the source: on the job's split leases).", "job", "op", "index")
	dOpParallelism = desc("op_parallelism", "Elements the op works on at once.", "job", "op", "index")
	dOpBounding    = desc("op_bounding", "1 on the op with the most stall in this node's task of the job: the one that bounds its throughput.", "job", "op", "index")
	dWorkBatches   = desc("worker_batches_encoded_total", "Batches this node's pipelines encoded, shared or not.")
	dWorkRows      = desc("worker_rows_encoded_total", "Elements (rows) of those batches.")
	dWorkShared    = desc("worker_shared_batches_total", "Batches of this node's shared productions (ephemeral sharing).")
	dShareBytes    = desc("share_window_bytes", "Bytes this node's sharing windows retain.")
	dShareWindows  = desc("share_windows", "Sharing windows on this node (one per dataset being shared).")
	dShareLimit    = desc("share_window_limit_bytes", "The byte bound of each sharing window.")
	dRecvWindow    = desc("transport_receive_window_bytes", "QUIC receive-window bytes this node's connections may hold unread (the budget in use).")
	dDataStreams   = desc("transport_data_streams", "Data (batch) streams this node serves now (bounded by --max-data-streams).")
	dRefused       = desc("transport_refused_total", "Connections and streams this node refused at its limits (docs/operating/limits.md): what is conns (--max-conns, --max-conns-per-addr), data_streams (--max-data-streams, --max-data-streams-per-addr) or control_streams (--max-rpc-streams-per-conn, --max-rpc-streams-per-addr).", "what")
	dGossipPackets = desc("gossip_packets_sent_total", "UDP gossip packets this node sent (probes, acks, gossip; compound packets count once). A cluster's gossip is the sum over its nodes.")
	dGossipPBytes  = desc("gossip_packet_bytes_sent_total", "Bytes of those packets.")
	dGossipStreams = desc("gossip_streams_total", "TCP gossip streams this node opened (push/pull state exchanges, joins, TCP fallback probes).")
	dGossipSBytes  = desc("gossip_stream_bytes_total", "Bytes over those streams, both directions.")
	dRPCRequests   = desc("rpc_requests_total", "Control requests this node served, by method (on the leader, the ones other nodes forwarded too: the control plane's fan-in).", "method")
	dLogLines      = desc("log_lines_total", "WARN and ERROR log lines by level and component, written or left out by the rate limiter.", "level", "component")
	dAuditLeftOut  = desc("audit_suppressed_total", "Audit lines of refused requests left out by the per-principal rate limit (counted in the summary lines).")
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dInfo, dMembers, dRaftLeader, dRaftState, dRaftTerm, dRaftCommit, dRaftApplied,
		dRaftLastLog, dRaftLag, dRaftVoters, dRaftCommands, dRaftApply, dJobs, dJobConsumers, dJobWorkers, dJobWanted, dNodesWanted, dWorkerNodes, dJobEpoch,
		dJobSplits, dJobLeased, dJobFinished, dJobLost, dTaskBatches, dTaskBytes, dTaskQueued, dOpElements, dOpBytes,
		dOpBusy, dOpStall, dOpWait, dOpParallelism, dOpBounding, dWorkBatches, dWorkRows, dWorkShared, dShareBytes,
		dShareWindows, dShareLimit, dRecvWindow, dDataStreams, dRefused, dGossipPackets, dGossipPBytes, dGossipStreams, dGossipSBytes, dRPCRequests, dLogLines, dAuditLeftOut} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	st := n.Status()
	gauge(dInfo, 1, st.Name, st.Version, st.Addr)
	byStatus := map[string]int{}
	for _, m := range n.Members() {
		byStatus[m.Status]++
	}
	for s, k := range byStatus {
		gauge(dMembers, float64(k), s)
	}
	leader := 0.0
	if n.Raft().IsLeader() {
		leader = 1
	}
	gauge(dRaftLeader, leader)
	gauge(dRaftState, 1, st.State)
	gauge(dRaftTerm, float64(st.Term))
	gauge(dRaftCommit, float64(st.CommitIndex))
	gauge(dRaftApplied, float64(st.AppliedIndex))
	gauge(dRaftLastLog, float64(st.LastLogIndex))
	gauge(dRaftLag, float64(max(int64(st.CommitIndex)-int64(st.AppliedIndex), 0)))
	gauge(dRaftVoters, float64(len(st.Voters)))
	for cmd, k := range n.Raft().AppliedCommands() {
		counter(dRaftCommands, float64(k), cmd)
	}
	count, total := n.Raft().ApplyLatency()
	ch <- prometheus.MustNewConstSummary(dRaftApply, uint64(count), total.Seconds(), nil)

	byState := map[string]int{}
	local := n.LocalJobs()
	gauge(dNodesWanted, float64(st.NodesWanted))
	gauge(dWorkerNodes, float64(st.WorkerNodes))
	for _, j := range local {
		byState[j.State]++
		workers := 0
		for _, w := range j.Workers {
			if !w.Expired && !w.Drained && !w.Dismissed {
				workers++
			}
		}
		if j.Scale != nil {
			gauge(dJobWanted, float64(j.Scale.Wanted), j.Name)
		}
		gauge(dJobConsumers, float64(len(j.Consumers)), j.Name)
		gauge(dJobWorkers, float64(workers), j.Name)
		gauge(dJobEpoch, float64(j.Epoch), j.Name)
		if j.NumSplits > 0 {
			gauge(dJobSplits, float64(j.NumSplits), j.Name)
			counter(dJobLeased, float64(j.Leased), j.Name)
			counter(dJobFinished, float64(j.Finished), j.Name)
			counter(dJobLost, float64(j.Lost), j.Name)
		}
	}
	for s, k := range byState {
		gauge(dJobs, float64(k), s)
	}

	for _, t := range n.Tasks() {
		counter(dTaskBatches, float64(t.Produced), t.Job)
		counter(dTaskBytes, float64(t.ProducedBytes), t.Job)
		gauge(dTaskQueued, float64(t.Queued), t.Job)
	}
	for _, t := range n.OpStats("").Tasks {
		for k, o := range t.Ops {
			l := []string{t.Job, o.Name, strconv.Itoa(o.Index)}
			counter(dOpElements, float64(o.ElementsOut), l...)
			counter(dOpBytes, float64(o.BytesOut), l...)
			counter(dOpBusy, o.BusySeconds, l...)
			counter(dOpStall, o.StallSeconds, l...)
			counter(dOpWait, o.WaitSeconds, l...)
			gauge(dOpParallelism, float64(o.Parallelism), l...)
			b := 0.0
			if k == t.Bounding {
				b = 1
			}
			gauge(dOpBounding, b, l...)
		}
	}
	w := n.Work()
	counter(dWorkBatches, float64(w.Batches))
	counter(dWorkRows, float64(w.Rows))
	counter(dWorkShared, float64(w.SharedBatches))
	sh := n.ShareStats("")
	gauge(dShareBytes, float64(sh.Bytes))
	gauge(dShareWindows, float64(sh.Windows))
	gauge(dShareLimit, float64(sh.WindowLimit))
	gauge(dRecvWindow, float64(n.Transport().ReceiveWindowInUse()))
	gauge(dDataStreams, float64(n.Transport().DataStreams()))
	rf := n.Transport().Refusals()
	counter(dRefused, float64(rf.Conns), "conns")
	counter(dRefused, float64(rf.DataStreams), "data_streams")
	counter(dRefused, float64(rf.ControlStreams), "control_streams")
	g := n.GossipStats()
	counter(dGossipPackets, float64(g.PacketsSent))
	counter(dGossipPBytes, float64(g.PacketBytes))
	counter(dGossipStreams, float64(g.Streams))
	counter(dGossipSBytes, float64(g.StreamBytes))
	for m, k := range n.RPCCalls() {
		counter(dRPCRequests, float64(k), m)
	}
	for k, v := range n.LogCounts() {
		counter(dLogLines, float64(v), k.Level, k.Component)
	}
	counter(dAuditLeftOut, float64(n.AuditSuppressed()))
}
