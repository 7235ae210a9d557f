package mesh_test

import (
	"testing"

	"github.com/feedmesh/feedmesh/mesh"
)

// TestNodeHoldsAtMost256MiB: with a node's default limits, what peers can
// make it hold (unread QUIC data and control requests;
// docs/operating/limits.md) is at most 256 MiB, in both presets.
func TestNodeHoldsAtMost256MiB(t *testing.T) {
	for name, cfg := range map[string]mesh.Config{"default": mesh.DefaultConfig(), "fast": mesh.FastConfig()} {
		if b := cfg.Transport.PeerMemoryBound(); b > 256<<20 {
			t.Errorf("%s preset: peers may make a node hold %d MiB", name, b>>20)
		} else {
			t.Logf("%s preset: at most %d MiB", name, b>>20)
		}
	}
}
