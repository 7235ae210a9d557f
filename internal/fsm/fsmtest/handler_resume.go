package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/ranges"
)

// resume name=<job> from=<job id> part=<consumer> want=<n>
// [delivered=(split:lo-hi, ...)] [done-before=<epoch>] [dataset=<fp> | splits=<n>]
// [epochs=<n>]
//
// One consumer's checkpoint of job from: the elements of epoch
// done-before (0 by default) that reached the trainer through it, and
// that every earlier epoch did. The job it creates or completes is
// exactly-once DYNAMIC, as a resumed job must be.
func handleResume(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	name, err := MustStr(d, "name")
	if err != nil {
		return err
	}
	from, err := Int(d, "from", 0)
	if err != nil {
		return err
	}
	want, err := Int(d, "want", 1)
	if err != nil {
		return err
	}
	epoch, err := Int(d, "done-before", 0)
	if err != nil {
		return err
	}
	_, got, err := splitElems(d, "delivered")
	if err != nil {
		return err
	}
	o, err := jobOptions(d)
	if err != nil {
		return err
	}
	o.Delivery = fsm.DeliveryExactlyOnce
	fp, err := e.datasetFor(d, name, out)
	if err != nil {
		return err
	}
	p := ranges.Delivered{DoneBefore: epoch}
	if len(got) > 0 {
		p.Returned = map[int64]map[int64]ranges.Set{epoch: got}
	}
	r := fsm.ResumeBody{From: uint64(from), Part: Str(d, "part", ""), Want: int(want), Delivered: p}
	v, err := e.Apply(fsm.LegacyResumeJob(name, fp, o, r))
	e.answer(out, fmt.Sprintf("job %s id=%v", name, v), err, name)
	return nil
}
