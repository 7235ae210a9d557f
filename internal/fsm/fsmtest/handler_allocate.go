package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// allocate job=<job> share=<nodes> [dismiss=(workers)] [reason=<text>]
//
// AllocateJob: the leader's allocation of nodes to an autoscaling job,
// dismissing the workers it takes back.
func handleAllocate(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, err := MustStr(d, "job")
	if err != nil {
		return err
	}
	share, err := Int(d, "share", 1)
	if err != nil {
		return err
	}
	dismiss := List(d, "dismiss")
	_, err = e.Apply(fsm.NewAllocateJob(job, int(share), Str(d, "reason", "test"), dismiss))
	e.answer(out, fmt.Sprintf("%d nodes, dismissing %v", share, dismiss), err, job)
	return nil
}
