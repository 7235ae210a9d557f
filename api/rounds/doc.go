// Package rounds is the round schedule of coordinated reads: which worker
// serves round r of a job, and how the rotation changes from an agreed
// round on. The state machine keeps a job's Schedule, the node serves the
// rounds the schedule gives it, and the client computes from the same
// schedule which worker to ask for each round: both sides must agree, so
// the schedule is part of the wire API.
//
// A Schedule is a value with no goroutines, clocks or I/O, tested by tables,
// properties and fuzzing.
package rounds
