package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// hand-back job=<job> worker=<id> splits=(ids) [epoch=<n>]
//
// HandBackSplits: a draining worker returns leased splits it has not
// started, for the job's other workers.
func handleHandBack(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	ids, err := Ints(d, "splits")
	if err != nil {
		return err
	}
	epoch, err := Int(d, "epoch", 0)
	if err != nil {
		return err
	}
	_, err = e.Apply(fsm.NewHandBackSplits(job, 0, worker, epoch, ids))
	e.answer(out, "handed back "+ints(ids), err, job)
	return nil
}
