// Command feedmesh-bench runs feedmesh's benchmarks. They live apart from the
// product binary (cmd/feedmesh), as hashicorp/raft keeps bench/ out of its
// library, so that `feedmesh` links no benchmark harness. Each benchmark is a
// subcommand that prints a table, or with --json an array of row objects;
// `feedmesh-bench NAME --help` documents its flags and JSON fields. Results
// and the command lines behind them are in docs/benchmarks: current.md (the
// latest figure of each feature) and log.md (every run, dated).
//
//	go run ./cmd/feedmesh-bench transport --workload text --baseline /tmp/fm-baseline
//
// The transport, fanin and python benchmarks measure separate processes: they
// re-execute this binary (os.Executable) in a hidden mode, `transport --peer`
// for each sender and receiver, `fanin --client` for the measured client and
// `python --go-reader` for the Go side of the Python client's comparison
// (its Python side runs python/bench/read_job.py and dataloader.py).
// The others run in-process clusters (mesh/localcluster) on loopback.
//
// Files, one per benchmark family:
//
//	main.go         the program (cmd/internal/cli: registry, dispatch, usage, exit codes)
//	bench.go        median and the other timing helpers the benchmarks share
//	cluster.go      cluster: formation, failover, failure detection, control round trip, gossip convergence
//	jobs.go         splits, dynamic, scaleout, recovery: DYNAMIC leasing through Raft and client throughput
//	releases.go     recovery: when a killed worker's splits are orphaned and leased again
//	sharing.go      sharing: k concurrent jobs of one dataset, ephemeral sharing on vs off
//	coordinated.go  coordinated: modelled training time with coordinated reads on vs off
//	transport.go    transport: the batch stream vs quic-go, gRPC+TLS, TCP+TLS, TCP (bench/transportbench)
//	fanin.go        fanin: one client process reading from 1…8 workers, its CPU and memory
//	python.go       python: the Python client vs the Go client, and a torch DataLoader vs feedmesh.torch
//	vision.go       vision: PIL and a torch DataLoader vs decode_image, decode_and_crop run-local and on a node (vision_dataloader.py)
package main
