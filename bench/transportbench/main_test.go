package transportbench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// peerEnv makes the test binary act as a feedmesh-bench peer (the harness
// starts it with RunPeer's arguments), so TestRunLoopbackTiny needs no build.
const peerEnv = "FEEDMESH_TRANSPORTBENCH_PEER"

func TestMain(m *testing.M) {
	if os.Getenv(peerEnv) == "1" {
		if err := RunPeer(context.Background(), os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
