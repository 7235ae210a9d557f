// Package plan is the leader's deciding logic, kept pure: each planner
// takes what gossip says of the members, the Raft configuration or the
// replicated jobs, and, where time matters, the clock as an argument, and
// returns what to do. The mesh gathers the inputs, carries out the
// decisions, and plans again from what changed; nothing here has a
// goroutine, a clock or a socket, so the planners are tested by tables,
// properties and scripts.
//
//   - Formation (BootstrapPlan) is Consul's bootstrap_expect: once a
//     node sees the expected number of members, the lowest ids bootstrap
//     with the identical voter list; a cluster that exists is joined,
//     never formed twice.
//   - Voter upkeep (PlanVoters) keeps the voters at their target (3, or 5
//     once the cluster is large enough), adding before removing, replacing
//     voters dead past a grace period, never risking the quorum.
//   - Job upkeep (PlanJobs) returns the state machine's commands for one
//     pass: expire dead workers (and older processes of restarted ones),
//     expire consumer leases, collect jobs without consumers, allocate
//     nodes to autoscaling jobs (max-min fair, one job
//     per node while they fit) and assign workers. It plans on a copy of
//     the jobs with its own earlier steps applied, through internal/fsm,
//     so each step sees what the ones before it do.
//
// The autoscaling policy itself, which the state machine also runs, is
// internal/plan/autoscale.
package plan
