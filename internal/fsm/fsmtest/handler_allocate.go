package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// allocate job=<job> share=<nodes> [release=(workers)] [reason=<text>]
//
// AllocateJob: the leader's allocation of nodes to an autoscaling job,
// releasing the workers it takes back.
func handleAllocate(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, err := MustStr(d, "job")
	if err != nil {
		return err
	}
	share, err := Int(d, "share", 1)
	if err != nil {
		return err
	}
	release := List(d, "release")
	_, err = e.Apply(fsm.NewAllocateJob(job, int(share), Str(d, "reason", "test"), release))
	e.answer(out, fmt.Sprintf("%d nodes, releasing %v", share, release), err, job)
	return nil
}
