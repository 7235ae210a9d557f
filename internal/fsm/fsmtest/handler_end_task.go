package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// end-task job=<job> worker=<id> [failure=<text>]
//
// EndTask: the worker's task of the job ended (its data, or a failure).
func handleEndTask(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	failure := Str(d, "failure", "")
	_, err = e.Apply(fsm.NewEndTaskOfJob(job, 0, worker, failure))
	what := worker + "'s task ended"
	if failure != "" {
		what = worker + "'s task failed"
	}
	e.answer(out, what, err, job)
	return nil
}
