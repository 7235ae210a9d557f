package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// heartbeat job=<job> consumer=<id> batch-time=<d> [queue=<batches>]
// [stall=<share>] [batches=<n>] [workers=<n>]
//
// AttachConsumer v2: a consumer's heartbeat with its latest metric, which
// steps an autoscaling job's policy.
func handleHeartbeat(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, consumer, err := jobAnd(d, "consumer")
	if err != nil {
		return err
	}
	bt, err := Duration(d, "batch-time", 0)
	if err != nil {
		return err
	}
	var m autoscale.Metric
	m.BatchTime = bt.Seconds()
	if m.ResultQueue, err = Float(d, "queue", 0); err != nil {
		return err
	}
	if m.Stall, err = Float(d, "stall", 0); err != nil {
		return err
	}
	if m.Batches, err = Int(d, "batches", 0); err != nil {
		return err
	}
	w, err := Int(d, "workers", 0)
	if err != nil {
		return err
	}
	m.Workers = int(w)
	v, err := e.Apply(fsm.NewHeartbeat(job, consumer, &m))
	exp, _ := v.(int64)
	e.answer(out, fmt.Sprintf("%s's lease runs until %s", consumer, at(exp)), err, job)
	return nil
}
