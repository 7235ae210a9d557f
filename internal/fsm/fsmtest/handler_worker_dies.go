package fsmtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// worker-dies worker=<id> [superseded=<incarnation>]
//
// ExpireWorker: the leader declares the worker dead in every job (with
// superseded=: only its process of that incarnation or older, replaced by
// a newer one, ExpireSuperseded).
func handleWorkerDies(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	worker, err := MustStr(d, "worker")
	if err != nil {
		return err
	}
	c := fsm.NewExpireWorker(worker)
	if d.HasArg("superseded") {
		inc, err := Int(d, "superseded", 0)
		if err != nil {
			return err
		}
		c = fsm.NewExpireSuperseded(worker, uint64(inc))
	}
	v, err := e.Apply(c)
	lost, _ := v.(map[string][]int64)
	jobs := slices.Sorted(maps.Keys(lost))
	var parts []string
	for _, j := range jobs {
		parts = append(parts, fmt.Sprintf("%s lost [%s]", j, ints(lost[j])))
	}
	what := fmt.Sprintf("%s expired in no job", worker)
	if len(parts) > 0 {
		what = fmt.Sprintf("%s expired: %s", worker, strings.Join(parts, "; "))
	}
	e.answer(out, what, err, jobs...)
	return nil
}
