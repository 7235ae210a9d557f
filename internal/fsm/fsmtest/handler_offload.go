package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// offload job=<job> consumer=<id> [local-worker] [retire] [remote=on|off]
// [cut=<ops>]
//
// Offload: a consumer runs a local worker, retires it, turns the nodes'
// part off or on, or cuts the pipeline.
func handleOffload(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, consumer, err := jobAnd(d, "consumer")
	if err != nil {
		return err
	}
	cut, err := Int(d, "cut", 0)
	if err != nil {
		return err
	}
	b := fsm.OffloadBody{Job: job, Consumer: consumer, LocalWorker: Flag(d, "local-worker"), Retire: Flag(d, "retire"),
		Remote: Str(d, "remote", fsm.RemoteUnchanged), Cut: int(cut)}
	_, err = e.Apply(fsm.NewOffload(b))
	e.answer(out, "offload of "+consumer, err, job)
	return nil
}
