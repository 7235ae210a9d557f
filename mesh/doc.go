// Package mesh is a feedmesh node: one process that is, at once, a member of
// the gossip mesh (hashicorp/memberlist), a possible Raft voter (internal/raftnode),
// and a QUIC endpoint (transport) serving control requests and, in later
// layers, batches. Every node is identical; which nodes vote is decided by
// bootstrap_expect formation and then kept at its target size by the leader.
//
// The deciding logic (who bootstraps, which voter to add or remove, and the
// leader's job upkeep: which dead workers to expire, which jobs to collect,
// which live workers to assign, plan.PlanJobs) lives in internal/plan as
// pure functions; this package is the I/O shell that feeds them gossip's
// view of the cluster and the clock and carries out what they decide (the
// job loop in jobs.go, the formation and voter loops in loops.go).
//
// As a worker a node runs one task per job (task.go), started by the first
// consumer stream that asks for the job (worker.go). A task's producer makes
// its batches in one of three ways, chosen from the job's options when it
// starts: plain, its own pipeline over its splits (produce_plain.go); shared,
// reading the one production per dataset that every sharing job on the
// worker reads through a share.Shared window (produce_shared.go,
// sharedprod.go); or rounds, for coordinated jobs: bucketed batches grouped
// into round windows (roundwindows.go), one per round, served on per-round
// requests (roundserver.go, produce_rounds.go); the round schedule itself is
// in the replicated state (internal/fsm). Every producer queues through one path, offer (offer.go),
// which is also where a task notices that its job is gone because its
// consumers left. DYNAMIC productions lease their splits through one lease
// loop (leases.go) whose sizing and ask-ahead policy is pure and takes the
// time as an argument (leasepolicy.go). Words, one meaning each: a
// production ends; a split is finished once read; a lease loop is done once
// the leader hands out no more.
//
// The wire API the node serves (method names, requests, responses) is in
// the subpackage api, which the client imports instead of this package.
//
// Files:
//
//	node.go            Node: start, Raft and transport wiring, close
//	gossip.go          memberlist setup and joining: --join, the recorded members, retries
//	config.go          Config, GossipConfig, DefaultConfig and FastConfig
//	identity.go        the node's persistent identity in its data dir
//	knownmembers.go    the members a node knows, kept in its data dir to rejoin them on restart
//	meta.go            gossip metadata (id, QUIC address, role, version) and publishing it
//	members.go         the member table fed by memberlist events
//	loops.go           background loops: formation, voters, role, reconnect
//	recover.go         Recover: survivors' data dirs made the only voters after losing quorum
//	control.go         control handlers and forwarding to the leader
//	jobs.go            job handlers (distribute, heartbeat, leases) and job upkeep
//	jobstate.go        a job's state (running, finished, failed) and recording a task's failure
//	sharestats.go      the leader's sum of the workers' sharing counters
//	logging.go         slog adapters for the libraries' loggers; the node's handler: quiet close, limits
//	loglimit.go        rate-limiting WARN/ERROR lines per cause, with counts (pure)
//	workerconfig.go    WorkerConfig: what a node does as a worker
//	worker.go          the worker: task registry, data stream accept, encoding
//	task.go            a task and the producer interface
//	offer.go           the one queueing path; what happens when consumers leave
//	framequeue.go      the batch queue and stream serving of plain and shared tasks
//	produce_plain.go   a task running its own pipeline (OFF, STATIC, DYNAMIC)
//	produce_shared.go  a sharing job's task, reading a shared production
//	sharedprod.go      the shared production of one dataset on a worker
//	produce_rounds.go  a coordinated task: windows to rounds, per-round streams
//	roundwindows.go    grouping bucketed batches into round windows, fillers (pure)
//	roundserver.go     which window serves which round for every consumer
//	leases.go          the DYNAMIC lease loop: leasing and reporting splits
//	leasepolicy.go     when to ask for a lease and how many splits (pure)
//	workerstats.go     what a worker reports: tasks, sharing, work counters
package mesh
