package fsmtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// finish job=<job> worker=<id> splits=(ids) [epoch=<n>]
//
// FinishSplits: an at-most-once worker read its leased splits to the end.
func handleFinish(e *Env, d *datadriven.TestData, out *strings.Builder) error {
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
	_, err = e.Apply(fsm.NewFinishSplits(job, worker, epoch, ids))
	e.answer(out, "finished "+ints(ids), err, job)
	return nil
}
