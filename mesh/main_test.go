package mesh_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// memberlist starts a goroutine per probe that Shutdown does not wait
	// for; it ends by itself once the probe's ack times out (a probe
	// interval). Everything the nodes start themselves is checked.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
