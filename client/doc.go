// Package client is the Go client of feedmesh: a training process dials
// any node, creates or joins a job for a dataset spec, and iterates over
// the batches that the job's workers stream to it over QUIC, from all of
// them in parallel, with credit-based flow control per stream and a
// prefetch buffer bounded in batches and bytes.
//
//	c, err := client.Dial(ctx, "10.0.0.5:7947", client.Options{})
//	it, err := c.Distribute(ctx, spec, client.JobOptions{Name: "resnet-run-7", Sharding: client.Dynamic})
//	for b, err := range it.All(ctx) { … }
//
// Trainers that name the same job share its data: each batch goes to one
// of them. The iterator ends (io.EOF) once every worker has finished the
// job's last epoch.
//
// With JobOptions.Coordinated the m consumers of a job (the ranks of one
// synchronous training step) instead read in rounds: in each round every
// one gets a batch of the same length bucket from the one worker that
// serves the round (coordinated.go). Batch.Round gives per batch its
// round, bucket and every consumer's padded token count. Exactly-once
// coordinated jobs give a rank an empty filler batch (Round.Filler) for a
// round it lost with a dead worker, so every rank takes the same steps.
//
// DYNAMIC jobs are exactly-once by default (JobOptions.Delivery): when a
// worker, the Raft leader or the node the client dialed dies, every
// element of every epoch still reaches the job's consumers once
// (receipts.go). Iterator.Checkpoint returns bytes that cover exactly the
// batches Next returned; JobOptions.Resume goes on from them, in a new
// process and on a cluster of any size (checkpoint.go):
//
//	ckpt, err := it.Checkpoint()  // with the model's checkpoint
//	it, err = c.Distribute(ctx, spec, client.JobOptions{Name: "resnet-run-7", Sharding: client.Dynamic, Resume: ckpt})
//
// An Iterator is one skeleton with two engines. The skeleton owns the
// iteration's lifecycle (context, heartbeat loop, prefetch buffer, end of
// data, Close waiting for every goroutine it started) and the parts both
// engines share (streams, retry policy, statistics); an engine implements
// only how batches are read (the engine interface), and reaches the
// Iterator through the host interface alone.
//
// Files:
//
//	client.go       Dial, the control client with failover, Distribute (the job options normalized once: NormalizeJobOptions), Attach
//	options.go      Options, their defaults, and the bound on buffered bytes they imply
//	control.go      the cluster's other control methods: Members, Status, Jobs, Put, Get
//	iterator.go     the skeleton: Iterator, the engine and host interfaces, Next, Close, the prefetch byte budget (transport.ByteBudget)
//	heartbeat.go    the heartbeat loop: lease renewal, the job's state, the job gone
//	streams.go      opening a batch stream to a worker, and how a stream ended
//	retry.go        the retry policy: delay after n failures (pure)
//	batch.go        Batch, Rows, Release and buffer recycling
//	stats.go        Stats and WorkerStats; the job's state and lost splits as the cluster reports them
//	plain.go        the plain engine: StreamsPerWorker streams to every worker
//	coordinated.go  the coordinated engine: rounds in order, horizon, end of rounds
//	rounds.go       reading one worker's rounds (the coordinated engine's fetchers)
//	sharestats.go   ShareStats: a sharing job's counters from its workers
//	receipts.go     exactly-once: the ledger of what was received, duplicates dropped, receipts and fences reported
//	checkpoint.go   exactly-once: Checkpoint, its format, what reached the trainer, resuming (JobOptions.Resume)
package client
