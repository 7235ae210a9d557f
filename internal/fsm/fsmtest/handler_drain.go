package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// drain job=<job> worker=<id> [incarnation=<n>]
//
// DrainTask: the worker's process drained its task before a graceful
// shutdown; it holds nothing of the job.
func handleDrain(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	inc, err := Int(d, "incarnation", 0)
	if err != nil {
		return err
	}
	_, err = e.Apply(fsm.NewDrainTask(job, 0, worker, uint64(inc)))
	e.answer(out, worker+" drained", err, job)
	return nil
}
