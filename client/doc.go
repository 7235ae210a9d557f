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
// serves the round (coordinated.go).
package client
