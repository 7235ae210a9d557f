package plan

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// bootstrap self=<id> expect=<n>
//
// BootstrapPlan: what node self does with the members it sees, waiting
// for bootstrap_expect of them.
func handleBootstrap(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	self, err := fsmtest.MustStr(d, "self")
	if err != nil {
		return err
	}
	expect, err := fsmtest.Int(d, "expect", 3)
	if err != nil {
		return err
	}
	members, err := e.raftMembers()
	if err != nil {
		return err
	}
	voters, boot := BootstrapPlan(self, int(expect), members)
	if voters == nil {
		out.WriteString("wait\n")
		return nil
	}
	var ids []string
	for _, v := range voters {
		ids = append(ids, v.ID)
	}
	what := "wait to be added"
	if boot {
		what = "bootstrap"
	}
	fmt.Fprintf(out, "%s with voters %s\n", what, strings.Join(ids, ", "))
	return nil
}
