package transportbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The veth path: two network namespaces joined by a veth pair with MTU 1500.
// scripts/veth.sh sets up exactly the same (use it to inspect the set-up by
// hand); addresses exist only inside the two namespaces.
const (
	NSSend   = "fmbench-tx" // the sender's namespace
	NSRecv   = "fmbench-rx" // the receiver's namespace
	AddrSend = "10.123.0.1" // the sender's address, in NSSend
	AddrRecv = "10.123.0.2" // the receiver's address, in NSRecv
	vethSend = "fmb-tx"
	vethRecv = "fmb-rx"
	vethMTU  = "1500"
)

// ErrSkipped reports a measurement path that cannot run here (not root, no
// ip command); the message says why.
var ErrSkipped = errors.New("skipped")

// ipTimeout bounds each ip command.
const ipTimeout = 10 * time.Second

// VethUp creates the two namespaces and the veth pair, unless both namespaces
// exist already (made by `scripts/veth.sh up`), which it then uses as they
// are. down removes what VethUp created (nothing when it reused them).
func VethUp(ctx context.Context, log io.Writer) (down func() error, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: the veth path needs root to create network namespaces (ip netns); run as root or use --path loopback", ErrSkipped)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: the veth path needs the ip command (iproute2): %v", ErrSkipped, err)
	}
	list, err := ipCmd(ctx, "netns", "list")
	if err != nil {
		return nil, fmt.Errorf("%w: ip netns list: %v", ErrSkipped, err)
	}
	if hasNS(list, NSSend) && hasNS(list, NSRecv) {
		fmt.Fprintf(log, "veth: using existing namespaces %s and %s\n", NSSend, NSRecv)
		return func() error { return nil }, nil
	}
	if hasNS(list, NSSend) || hasNS(list, NSRecv) {
		return nil, fmt.Errorf("veth: only one of the namespaces %s, %s exists: run scripts/veth.sh down first", NSSend, NSRecv)
	}
	down = func() error {
		// Deleting a namespace deletes the veth end inside it, and with it the pair.
		_, e1 := ipCmd(context.Background(), "netns", "del", NSSend)
		_, e2 := ipCmd(context.Background(), "netns", "del", NSRecv)
		return errors.Join(e1, e2)
	}
	steps := [][]string{
		{"netns", "add", NSSend},
		{"netns", "add", NSRecv},
		{"link", "add", vethSend, "netns", NSSend, "mtu", vethMTU, "type", "veth", "peer", "name", vethRecv, "netns", NSRecv, "mtu", vethMTU},
		{"-n", NSSend, "addr", "add", AddrSend + "/24", "dev", vethSend},
		{"-n", NSRecv, "addr", "add", AddrRecv + "/24", "dev", vethRecv},
		{"-n", NSSend, "link", "set", vethSend, "up"},
		{"-n", NSRecv, "link", "set", vethRecv, "up"},
		{"-n", NSSend, "link", "set", "lo", "up"},
		{"-n", NSRecv, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if _, err := ipCmd(ctx, s...); err != nil {
			_ = down()
			return nil, fmt.Errorf("veth set-up: %w", err)
		}
	}
	fmt.Fprintf(log, "veth: namespaces %s (%s) and %s (%s) joined by a veth pair, MTU %s\n", NSSend, AddrSend, NSRecv, AddrRecv, vethMTU)
	return down, nil
}

func ipCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// hasNS reports whether `ip netns list` output names ns.
func hasNS(list, ns string) bool {
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == ns {
			return true
		}
	}
	return false
}
