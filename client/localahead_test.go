package client_test

import (
	"testing"

	"github.com/feedmesh/feedmesh/client"
)

// systemtest/offload's TestOffloadClientKilled bounds what a killed
// consumer's process held by the local worker's batches waiting for their
// receipts, localAhead, which it cannot see (export_test.go reaches
// client's own tests only): it mirrors the value. Change both together.
func TestLocalAheadMirrored(t *testing.T) {
	const mirrored = 32 // systemtest/offload/offload_kill_test.go: localAhead
	if client.LocalAhead != mirrored {
		t.Fatalf("client's localAhead is %d; systemtest/offload's TestOffloadClientKilled mirrors %d: update it", client.LocalAhead, mirrored)
	}
}
