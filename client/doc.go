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
package client
