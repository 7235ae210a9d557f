package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// create-job name=<job> [dataset=<fp> | splits=<n>] [sharding=off|static|dynamic]
// [delivery=exactly-once|at-most-once] [epochs=<n>] [consumers=<n>]
// [max-workers=<n>] [static=(w1, w2)] [share] [coordinated] [autoscale]
// [count-loss] [consumer-ttl=<d>] [gc-after=<d>] [start-at=<workers> from=<job>]
//
// With splits=<n> and no dataset=, the job's own dataset of n splits
// (fingerprint ds-<job>) is registered first, as the mesh registers a
// dataset before it creates a job over it.
func handleCreateJob(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	name, err := MustStr(d, "name")
	if err != nil {
		return err
	}
	o, err := jobOptions(d)
	if err != nil {
		return err
	}
	fp, err := e.datasetFor(d, name, out)
	if err != nil {
		return err
	}
	var start *fsm.ScaleStart
	if d.HasArg("start-at") {
		w, err := Int(d, "start-at", 1)
		if err != nil {
			return err
		}
		start = &fsm.ScaleStart{Workers: int(w), From: Str(d, "from", "")}
	}
	v, err := e.Apply(fsm.LegacyCreateJobAt(name, fp, o, List(d, "static"), start))
	e.answer(out, fmt.Sprintf("job %s id=%v", name, v), err, name)
	return nil
}

// datasetFor is the fingerprint a job names: dataset=, or its own
// dataset of splits= splits, registered now if it is not.
func (e *Env) datasetFor(d *datadriven.TestData, job string, out *strings.Builder) (string, error) {
	if fp := Str(d, "dataset", ""); fp != "" {
		return fp, nil
	}
	n, err := Int(d, "splits", 4)
	if err != nil {
		return "", err
	}
	fp := "ds-" + job
	if have, ok := e.State.Dataset(fp); ok && have.NumSplits == n {
		return fp, nil
	}
	if _, err := e.Apply(fsm.NewRegisterDataset(fsm.Dataset{Fingerprint: fp, Spec: []byte("spec of " + fp), NumSplits: n})); err != nil {
		return "", fmt.Errorf("register dataset %s: %w", fp, err)
	}
	fmt.Fprintf(out, "ok: dataset %s, %d splits\n", fp, n)
	return fp, nil
}

// jobOptions reads a job's options from the command's arguments.
func jobOptions(d *datadriven.TestData) (fsm.JobOptions, error) {
	var o fsm.JobOptions
	switch s := Str(d, "sharding", "dynamic"); s {
	case "off":
		o.Sharding = splits.Off
	case "static":
		o.Sharding = splits.Static
	case "dynamic":
		o.Sharding = splits.Dynamic
	default:
		return o, badArg("sharding=%s", s)
	}
	o.Delivery = Str(d, "delivery", "")
	o.Share, o.Coordinated, o.Autoscale, o.CountLoss = Flag(d, "share"), Flag(d, "coordinated"), Flag(d, "autoscale"), Flag(d, "count-loss")
	var err error
	var n int64
	if o.Epochs, err = Int(d, "epochs", 1); err != nil {
		return o, err
	}
	if n, err = Int(d, "consumers", 0); err != nil {
		return o, err
	}
	o.NumConsumers = int(n)
	if n, err = Int(d, "max-workers", 0); err != nil {
		return o, err
	}
	o.MaxWorkers = int(n)
	if o.ConsumerTTL, err = Duration(d, "consumer-ttl", 0); err != nil {
		return o, err
	}
	o.GCAfter, err = Duration(d, "gc-after", 0)
	return o, err
}
