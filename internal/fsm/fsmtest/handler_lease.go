package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// lease job=<job> worker=<id> [n=<splits>] [incarnation=<n>] [request=<id>]
// [prefer=(ids)] [job-id=<id>]
//
// LeaseSplits: the worker asks for up to n splits. Each lease of a worker
// is a new request unless request= repeats one (a retry).
func handleLease(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	n, err := Int(d, "n", 1)
	if err != nil {
		return err
	}
	inc, err := Int(d, "incarnation", 0)
	if err != nil {
		return err
	}
	jobID, err := Int(d, "job-id", 0)
	if err != nil {
		return err
	}
	prefer, err := Ints(d, "prefer")
	if err != nil {
		return err
	}
	req, err := Int(d, "request", int64(e.requests[worker]+1))
	if err != nil {
		return err
	}
	e.requests[worker] = max(e.requests[worker], uint64(req))
	c := fsm.NewLeaseSplitsPreferring(job, uint64(jobID), worker, uint64(inc), uint64(req), int(n), ranges.Of(prefer...))
	if inc == 0 && jobID == 0 && len(prefer) == 0 {
		c = fsm.NewLeaseSplits(job, worker, uint64(req), int(n))
	}
	v, err := e.Apply(c)
	l, _ := v.(splits.Lease)
	e.answer(out, lease(l), err, job)
	return nil
}
