package compose

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestFractionAtMostOnceCountsLoss: an at-most-once job with a local
// worker making a fraction of the batches counts its loss exactly, and
// ends, when the job's one node worker is killed: the local worker holds
// one of the job's worker slots (workers 1, or auto), so no node is
// assigned after the kill, and the local worker runs the census of the
// dead node's unfinished splits itself (it delivers nothing). Before, the
// census waited for a node for ever and the job never ended. Checked
// element by element: none twice, and the reported loss is exactly what
// did not arrive.
func TestFractionAtMostOnceCountsLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster and a kill per case")
	}
	cases := []jobspec.Combo{
		{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Offload: "0.5", Workers: "1"},
		{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Offload: "0.5", Workers: jobspec.AutoWorkers},
		{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Offload: "0.5", Workers: "1", TakeSkip: jobspec.ValSkip, Epochs: 2},
	}
	c := testcluster.Start(t, 3)
	cl := dial(t, c, 0)
	for i, combo := range cases {
		if err := combo.Check(); err != nil {
			t.Fatalf("%v: refused: %v", combo, err)
		}
		if g := combo.Guarantee(); !g.LossCounted {
			t.Fatalf("%v: guarantee %+v, want the loss counted", combo, g)
		}
		t.Run(fmt.Sprintf("case%d", i), func(t *testing.T) {
			t.Logf("%v; guarantee: %s", combo, combo.Guarantee())
			runRowKilling(t, c, cl, 70+i, combo, func(t *testing.T, job string, _ got) int {
				return nodeWorker(t, c, cl, job)
			})
		})
		if t.Failed() {
			return
		}
	}
}

// nodeWorker is a live node worker of job (the first by name): the
// dialed node or the leader too, if it is the one.
func nodeWorker(t *testing.T, c *testcluster.Cluster, cl *client.Client, job string) int {
	t.Helper()
	var nodes []int
	c.WaitFor(t, 10*time.Second, "a node worker of "+job, func() bool {
		ji, ok := jobtest.JobInfo(t, cl, job)
		if !ok {
			return false
		}
		nodes = nodes[:0]
		for _, w := range ji.Workers {
			if i := c.Index(w.Name); i >= 0 && !w.Expired {
				nodes = append(nodes, i)
			}
		}
		return len(nodes) > 0
	})
	slices.Sort(nodes)
	return nodes[0]
}
