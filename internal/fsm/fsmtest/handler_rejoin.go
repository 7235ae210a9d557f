package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// rejoin job=<job> worker=<id>
//
// DrainTask v2 with Rejoin: a newer process of a worker that drained or
// was expired takes its task of the job back.
func handleRejoin(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	_, err = e.Apply(fsm.NewRejoinTask(job, worker))
	e.answer(out, worker+" rejoined", err, job)
	return nil
}
