package fsmtest

import (
	"maps"
	"slices"
	"strings"

	"github.com/cockroachdb/datadriven"
)

// show [job=<job>]
//
// The state of a job, or of every job (share groups included).
func handleShow(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	jobs := List(d, "job")
	if len(jobs) == 0 {
		jobs = slices.Sorted(maps.Keys(e.State.Jobs))
	}
	for _, j := range jobs {
		out.WriteString(e.Job(j))
	}
	if len(jobs) == 0 {
		out.WriteString("no jobs\n")
	}
	return nil
}
