// Package jobspec is the schema of a job that both sides of the wire
// share: its options, their one normalization, the bounds a job and its
// exactly-once bookkeeping must respect, and the names its workers lease
// under. The client checks what it sends against it and the state machine
// what it accepts, so the two never disagree on an option or a limit.
//
// A job's options take one path, normalized once per trust boundary:
//
//	Options        what a consumer gives (Go's client.JobOptions, Python's
//	               distribute keywords, `feedmesh read`'s flags) and what a
//	               distribute request carries (api.JobOptions is Options)
//	  Normalize    the client before it sends; the node when it takes the
//	               request
//	Normalized     the job's name, its Job and this consumer's Consumer
//	Job            the job's options: stored as they are in the state
//	               machine's CreateJob (v6) and its snapshots, shown in
//	               api.JobInfo (Job.Options)
//	Consumer       the consumer's choices (index, offload, local CPUs,
//	               resume), never stored with the job
//
// Normalized, Job and Consumer have unexported fields: a value of them is
// normalized, and decoding a Job normalizes and checks it again.
//
// It imports nothing of feedmesh: the wire API, the client and the
// server's pure cores all stand on it.
package jobspec
