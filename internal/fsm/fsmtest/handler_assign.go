package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// assign job=<job> worker=<id> [version=1]
//
// AssignTask: the leader gives the worker a task of the job (version 1:
// as logs from before expiry was final wrote it).
func handleAssign(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	c := fsm.NewAssignTask(job, worker)
	if Str(d, "version", "") == "1" {
		c.Version = 1
	}
	v, err := e.Apply(c)
	what := fmt.Sprintf("%s assigned", worker)
	if isNew, _ := v.(bool); !isNew {
		what = fmt.Sprintf("%s was assigned already", worker)
	}
	e.answer(out, what, err, job)
	return nil
}
