//go:build scale

package scale

import (
	"testing"

	"go.uber.org/goleak"
)

// After the cluster's Close, nothing a node started may still run (the
// prompt shutdown of issue 41): memberlist's per-probe goroutines outlive
// its Shutdown by up to a probe interval (see mesh's TestMain).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
