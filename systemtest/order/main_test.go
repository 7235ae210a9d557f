package order

import (
	"testing"

	"go.uber.org/goleak"
)

// memberlist's per-probe goroutines outlive its Shutdown by up to a probe
// interval (see mesh's TestMain); everything else must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
