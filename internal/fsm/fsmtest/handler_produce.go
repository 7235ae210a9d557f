package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/ranges"
)

// produce job=<job> worker=<id> emitted=(split:lo-hi, ...) [epoch=<n>] [job-id=<id>]
//
// ProduceSplits: an exactly-once (or loss-counting) worker emitted every
// element of these splits, the indices [lo, hi) of each.
func handleProduce(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, worker, err := jobAnd(d, "worker")
	if err != nil {
		return err
	}
	ids, elems, err := splitElems(d, "emitted")
	if err != nil {
		return err
	}
	epoch, err := Int(d, "epoch", 0)
	if err != nil {
		return err
	}
	jobID, err := Int(d, "job-id", 0)
	if err != nil {
		return err
	}
	var done []ranges.SplitEmitted
	var parts []string
	for _, s := range ids {
		done = append(done, ranges.SplitEmitted{Split: s, Emitted: elems[s]})
		parts = append(parts, fmt.Sprintf("%d %v", s, elems[s]))
	}
	_, err = e.Apply(fsm.NewProduceSplitsOfJob(job, uint64(jobID), worker, epoch, done))
	e.answer(out, "produced "+strings.Join(parts, ", "), err, job)
	return nil
}
