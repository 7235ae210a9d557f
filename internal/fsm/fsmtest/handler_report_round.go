package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// report-round job=<job> index=<consumer index> round=<n>
//
// ReportRound: a coordinated job's consumer reached a round.
func handleReportRound(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, err := MustStr(d, "job")
	if err != nil {
		return err
	}
	idx, err := Int(d, "index", 0)
	if err != nil {
		return err
	}
	round, err := Int(d, "round", 0)
	if err != nil {
		return err
	}
	v, err := e.Apply(fsm.NewReportRound(job, int(idx), round))
	e.answer(out, fmt.Sprintf("consumer %d has reached round %v", idx, v), err, job)
	return nil
}
