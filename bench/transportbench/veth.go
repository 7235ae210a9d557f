package transportbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
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

// The rate limit of the veth path (Config.Rate, `scripts/veth.sh rate`): a
// tbf qdisc at the root of the sender's veth end, so it shapes the batches'
// direction only (acknowledgements and credits flow back unshaped). tbf
// rather than netem's rate: it holds TCP and QUIC alike at the rate, its
// queue is bounded in bytes (latency), and a GSO/TSO super-packet (up to
// 64 KiB on veth) is charged for all its bytes; tbfBurst is above that
// size, so tbf passes such packets whole rather than segmenting them in
// software (which would cost the sender CPU a real NIC does not). The
// queue holds tbfLatency of traffic at the rate. scripts/veth.sh uses the
// same parameters.
const (
	tbfBurst   = "131072" // bytes
	tbfLatency = "25ms"
)

// rateUnits are tc's rate units (tc(8), "RATES"), compared ignoring case as
// tc does: "bit" units are bits per second, "Bps" units bytes per second
// (so 100mbps is 100 megabytes per second, as in tc).
var rateUnits = []struct {
	name  string
	scale float64 // bits per second per unit
}{
	{"bit", 1}, {"kibit", 1 << 10}, {"kbit", 1e3}, {"mibit", 1 << 20}, {"mbit", 1e6},
	{"gibit", 1 << 30}, {"gbit", 1e9}, {"tibit", 1 << 40}, {"tbit", 1e12},
	{"bps", 8}, {"kibps", 8 << 10}, {"kbps", 8e3}, {"mibps", 8 << 20}, {"mbps", 8e6},
	{"gibps", 8 << 30}, {"gbps", 8e9}, {"tibps", 8 << 40}, {"tbps", 8e12},
}

// Bounds of a rate limit, in bits per second.
const (
	minRateBits = 1e6
	maxRateBits = 100e9
)

// ParseRate parses a rate in tc's syntax — a number followed by a unit:
// 1gbit, 500mbit, 2.5gbit, 100MBps — and returns it in bits per second.
// A unit is required (tc reads a bare number as bits per second, easy to
// get wrong), percentages are refused (a veth has no line rate), and the
// rate must lie in [1mbit, 100gbit].
func ParseRate(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 || i == len(t) {
		return 0, fmt.Errorf("rate %q: want a number and a unit, e.g. 1gbit, 500mbit, 100mbit (tc's syntax)", s)
	}
	v, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: bad number %q", s, t[:i])
	}
	for _, u := range rateUnits {
		if t[i:] != u.name {
			continue
		}
		bits := v * u.scale
		if bits < minRateBits || bits > maxRateBits {
			return 0, fmt.Errorf("rate %q is %.4g bit/s, out of range [1mbit, 100gbit]", s, bits)
		}
		return bits, nil
	}
	return 0, fmt.Errorf("rate %q: unknown unit %q, want one of tc's: bit, kbit, mbit, gbit, tbit (bits per second), bps, kbps, mbps, gbps, tbps (bytes per second), or kibit, mibit, … kibps, mibps, …", s, t[i:])
}

// needTC reports (wrapping ErrSkipped) that the rate limit cannot be set here.
func needTC() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: --rate shapes the veth path with tc, which needs root", ErrSkipped)
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return fmt.Errorf("%w: --rate needs the tc command (iproute2) to shape the veth path: %v", ErrSkipped, err)
	}
	return nil
}

// tcCmd runs tc inside the sender's namespace.
func tcCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	args = append([]string{"-n", NSSend}, args...)
	out, err := exec.CommandContext(ctx, "tc", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// rootQdisc parses `tc qdisc show dev D root`: the root qdisc's kind
// ("noqueue" when there is none) and, for tbf, its rate as tc prints it.
func rootQdisc(show string) (kind, rate string) {
	for _, line := range strings.Split(show, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "qdisc" || !slices.Contains(f, "root") {
			continue
		}
		kind = f[1]
		if i := slices.Index(f, "rate"); kind == "tbf" && i >= 0 && i+1 < len(f) {
			rate = f[i+1]
		}
		return kind, rate
	}
	return "noqueue", ""
}

// ShapeVeth applies Config.Rate to the veth pair VethUp set up: with rate
// not empty it adds the tbf qdisc at the root of the sender's veth end
// (undo removes it); an existing rate limit (from scripts/veth.sh rate) is
// refused. With rate empty it changes nothing but reports an existing
// limit, which then applies to the run. in force is the limit the run
// measures under ("" for none).
func ShapeVeth(ctx context.Context, rate string, log io.Writer) (inForce string, undo func() error, err error) {
	undo = func() error { return nil }
	rate = strings.ToLower(strings.TrimSpace(rate))
	if rate != "" {
		if _, err := ParseRate(rate); err != nil {
			return "", nil, err
		}
		if err := needTC(); err != nil {
			return "", nil, err
		}
	}
	show := ""
	if _, err := exec.LookPath("tc"); err == nil {
		var qerr error
		if show, qerr = tcCmd(ctx, "qdisc", "show", "dev", vethSend, "root"); qerr != nil {
			if rate != "" {
				return "", nil, fmt.Errorf("veth: %w", qerr)
			}
			fmt.Fprintf(log, "veth: note: could not check %s for a rate limit: %v\n", vethSend, qerr)
		}
	}
	kind, existing := rootQdisc(show)
	switch {
	case rate == "" && kind == "tbf":
		fmt.Fprintf(log, "veth: %s is shaped already (tbf rate %s, by scripts/veth.sh rate?): the run measures under it (veth.sh rate off removes it)\n", vethSend, existing)
		return existing, undo, nil
	case rate == "" && kind != "noqueue":
		fmt.Fprintf(log, "veth: note: %s has a %s qdisc, not set by feedmesh\n", vethSend, kind)
		return "", undo, nil
	case rate == "":
		return "", undo, nil
	case kind == "tbf":
		return "", nil, fmt.Errorf("veth: %s is shaped already (tbf rate %s, by scripts/veth.sh rate?): remove it with scripts/veth.sh rate off, or drop --rate to measure under it", vethSend, existing)
	case kind != "noqueue":
		return "", nil, fmt.Errorf("veth: %s already has a %s qdisc, not set by feedmesh: remove it (tc -n %s qdisc del dev %s root) or drop --rate", vethSend, kind, NSSend, vethSend)
	}
	undo = func() error {
		_, err := tcCmd(context.Background(), "qdisc", "del", "dev", vethSend, "root")
		return err
	}
	if _, err := tcCmd(ctx, "qdisc", "add", "dev", vethSend, "root", "tbf", "rate", rate, "burst", tbfBurst, "latency", tbfLatency); err != nil {
		return "", nil, fmt.Errorf("veth: set the rate limit: %w", err)
	}
	fmt.Fprintf(log, "veth: %s egress (sender → receiver) shaped to %s: tc tbf burst %s latency %s\n", vethSend, rate, tbfBurst, tbfLatency)
	return rate, undo, nil
}
