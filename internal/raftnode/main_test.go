package raftnode

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind. No
// goroutine of hashicorp/raft or bbolt is ignored: Node.Close waits for
// raft's own goroutines (Shutdown), closes every transport connection and
// waits for the inbound handlers, so nothing should remain.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
