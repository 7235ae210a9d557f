package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// stepDetail is what a step's body says beyond its job and worker: an
// allocation's share and releases, a rejoin, a superseded process, the
// clock of a consumer expiry. (The bodies' keys are the log format's.)
func stepDetail(st JobStep) string {
	var b map[int]any
	if err := cbor.Unmarshal(st.Command.Body, &b); err != nil {
		return "undecodable: " + err.Error()
	}
	switch st.Command.Type {
	case fsm.TypeAllocateJob:
		s := fmt.Sprintf("share %v: %v", b[2], b[3])
		if r, ok := b[4]; ok {
			s += fmt.Sprintf("; release %v", r)
		}
		return s
	case fsm.TypeDrainTask:
		if b[5] == true {
			return "rejoin"
		}
	case fsm.TypeExpireWorker:
		if inc, ok := b[2]; ok {
			return fmt.Sprintf("superseded: incarnation %v and older", inc)
		}
	case fsm.TypeExpireConsumers:
		if now, ok := b[1].(uint64); ok {
			return "at " + (time.Duration(int64(now) - fsmtest.Start.UnixNano())).String()
		}
	}
	return ""
}

// parseAgo parses a duration ago ("30s").
func parseAgo(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("down=%s: %w", s, err)
	}
	return d, nil
}
