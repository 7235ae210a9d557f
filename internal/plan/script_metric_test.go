package plan

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// metric batch-time=<d> [queue=<batches>] [stall=<share>] [batches=<n>]
// [limit=<workers>] [repeat=<n>]
//
// One window's metric from the job's consumer (repeat: that many alike),
// stepping the policy; prints the state after each.
func handleMetric(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	bt, err := fsmtest.Duration(d, "batch-time", 0)
	if err != nil {
		return err
	}
	m := autoscale.Metric{BatchTime: bt.Seconds()}
	if m.ResultQueue, err = fsmtest.Float(d, "queue", 0); err != nil {
		return err
	}
	if m.Stall, err = fsmtest.Float(d, "stall", 0); err != nil {
		return err
	}
	if m.Batches, err = fsmtest.Int(d, "batches", 0); err != nil {
		return err
	}
	limit, err := fsmtest.Int(d, "limit", 16)
	if err != nil {
		return err
	}
	repeat, err := fsmtest.Int(d, "repeat", 1)
	if err != nil {
		return err
	}
	for range repeat {
		e.scale = autoscale.Step(e.scale, m, e.policy, int(limit))
		fmt.Fprintf(out, "%s\n", scaleString(e.scale))
	}
	return nil
}
