package plan

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// policy [threshold=<share>] [revisit=<metrics>] [pause=<metrics>]
// [pause-up=<metrics>] [queue-min=<batches>] [stall-bound] [settle]
// [no-scale-down] [workers=<n>]
//
// A new autoscaling job at workers (1 by default), stepped with
// Cachew's knobs changed as given.
func handlePolicy(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	c := autoscale.DefaultConfig()
	var err error
	if c.Threshold, err = fsmtest.Float(d, "threshold", c.Threshold); err != nil {
		return err
	}
	if c.QueueMin, err = fsmtest.Float(d, "queue-min", c.QueueMin); err != nil {
		return err
	}
	for _, k := range []struct {
		key string
		v   *int
	}{{"revisit", &c.RevisitEvery}, {"pause", &c.PauseMetrics}, {"pause-up", &c.PauseUp}} {
		n, err := fsmtest.Int(d, k.key, int64(*k.v))
		if err != nil {
			return err
		}
		*k.v = int(n)
	}
	c.StallBound, c.SettleOnConverge, c.NoScaleDown = fsmtest.Flag(d, "stall-bound"), fsmtest.Flag(d, "settle"), fsmtest.Flag(d, "no-scale-down")
	if err := c.Validate(); err != nil {
		return err
	}
	w, err := fsmtest.Int(d, "workers", 1)
	if err != nil {
		return err
	}
	e.policy, e.scale = c, autoscale.NewState()
	e.scale.Workers = int(w)
	fmt.Fprintf(out, "%s\n", scaleString(e.scale))
	return nil
}

// scaleString renders the policy's state: "2 workers, scaling up,
// pausing 1: why".
func scaleString(s autoscale.State) string {
	str := fmt.Sprintf("%d workers, %v", s.Workers, s.Phase)
	if s.Pause > 0 {
		str += fmt.Sprintf(", pausing %d", s.Pause)
	}
	return str + ": " + s.Reason
}
