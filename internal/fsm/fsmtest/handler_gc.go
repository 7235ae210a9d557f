package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// gc job=<job>
//
// GarbageCollectJob: the leader removes a job that has been without
// consumers for its gc_after.
func handleGC(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, err := MustStr(d, "job")
	if err != nil {
		return err
	}
	v, err := e.Apply(fsm.NewGarbageCollectJob(job))
	e.answer(out, fmt.Sprintf("%s existed: %v", job, v), err, job)
	return nil
}
