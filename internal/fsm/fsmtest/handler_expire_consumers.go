package fsmtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// expire-consumers
//
// ExpireConsumers at the clock's now: the leader drops the consumers
// whose lease ran out.
func handleExpireConsumers(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	v, err := e.Apply(fsm.NewExpireConsumers(e.Now.UnixNano()))
	dropped, _ := v.(map[string][]string)
	var parts []string
	for _, j := range slices.Sorted(maps.Keys(dropped)) {
		parts = append(parts, fmt.Sprintf("%s from %s", strings.Join(dropped[j], ", "), j))
	}
	what := "no consumer dropped"
	if len(parts) > 0 {
		what = "dropped " + strings.Join(parts, "; ")
	}
	e.answer(out, what, err, slices.Sorted(maps.Keys(dropped))...)
	return nil
}
