// Command feedmesh is the product binary: every node runs it, and so does
// an operator talking to a cluster. One file per subcommand, each
// registering itself in init:
//
//	main.go     the program (cmd/internal/cli: registry, dispatch, usage, exit codes)
//	node.go     feedmesh node: run a node (mesh.Config from flags and environment)
//	members.go  feedmesh members and status: a node's view of the cluster (and the flags every client command shares)
//	read.go     feedmesh read: run a job and read its batches
//	jobs.go     feedmesh jobs: list the cluster's jobs
//	readck.go   feedmesh read --checkpoint and --resume: an exactly-once job's checkpoint file
//	dump.go     feedmesh read --dump: the elements read as JSON lines
//	runlocal.go feedmesh run-local: a pipeline spec in-process with per-op statistics
//	diagnose.go feedmesh diagnose: what bounds a spec's throughput, Plumber's allocation, --write the tuned spec
//	demo.go     feedmesh demo: an in-process cluster, a built-in dataset, live progress, a leader killed
//	recover.go  feedmesh recover: after losing a Raft quorum for good, make the stopped survivors the only voters
//	tls.go      feedmesh tls ca create, tls cert create: a cluster's CA, node and client certificates
//	version.go  feedmesh version
//	reference.go feedmesh help-reference: every command's flags in Markdown, docs/operating/flags.md (go generate)
//	flags.go    flags that also read FEEDMESH_* environment variables
//
// The benchmarks are cmd/feedmesh-bench, so this binary links none of them;
// the two share their subcommand scaffolding through cmd/internal/cli.
package main
