// Package jobspec is the schema of a job that both sides of the wire
// share: the bounds a job and its exactly-once bookkeeping must respect,
// and the names its workers lease under. The client checks what it sends
// against it and the state machine what it accepts, so the two never
// disagree on a limit.
//
// It imports nothing of feedmesh: the wire API, the client and the
// server's pure cores all stand on it.
package jobspec
