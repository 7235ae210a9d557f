package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// allocate-workers want=(job:n, ...) nodes=(ids) [current=(job:node, ...)]
//
// The allocation of nodes to autoscaling jobs (allocateWorkers) that
// PlanJobs applies: each job's nodes.
func handleAllocateWorkers(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	want := map[string]int{}
	for _, item := range fsmtest.List(d, "want") {
		job, n, ok := strings.Cut(item, ":")
		w, err := strconv.Atoi(n)
		if !ok || err != nil {
			return fmt.Errorf("want: %q is not job:workers", item)
		}
		want[job] = w
	}
	current := map[string][]string{}
	for _, item := range fsmtest.List(d, "current") {
		job, node, ok := strings.Cut(item, ":")
		if !ok {
			return fmt.Errorf("current: %q is not job:node", item)
		}
		current[job] = append(current[job], node)
	}
	alloc := allocateWorkers(want, fsmtest.List(d, "nodes"), current)
	for _, j := range slices.Sorted(maps.Keys(alloc)) {
		fmt.Fprintf(out, "%s (wants %d): %s\n", j, want[j], strings.Join(alloc[j], " "))
	}
	return nil
}
