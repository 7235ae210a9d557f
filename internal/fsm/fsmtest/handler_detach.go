package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// detach job=<job> consumer=<id>
func handleDetach(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, consumer, err := jobAnd(d, "consumer")
	if err != nil {
		return err
	}
	v, err := e.Apply(fsm.NewDetachConsumer(job, consumer))
	e.answer(out, fmt.Sprintf("%s was attached: %v", consumer, v), err, job)
	return nil
}
