package plan

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// config voters=(ids) [nonvoters=(ids)] leader=<id>
//
// The Raft configuration as the leader reads it, servers addressed as
// gossip has them (id:7000).
func handleConfig(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	e.config = nil
	for _, v := range fsmtest.List(d, "voters") {
		e.config = append(e.config, ConfigServer{ID: v, Addr: v + ":7000", Suffrage: SuffrageVoter})
	}
	for _, v := range fsmtest.List(d, "nonvoters") {
		e.config = append(e.config, ConfigServer{ID: v, Addr: v + ":7000", Suffrage: SuffrageNonvoter})
	}
	e.leader = fsmtest.Str(d, "leader", "")
	fmt.Fprintf(out, "%s\n", e.configString())
	return nil
}
