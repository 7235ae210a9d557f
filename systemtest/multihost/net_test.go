package multihost

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hosts is a bridge with one network namespace per host on it: host i is
// namespace ns[i], interface eth0 at ip[i]; the bridge itself has gw in
// the machine's own namespace (where the test, its DNS server and its
// client run). Each namespace's /etc/netns/NS/resolv.conf names the DNS
// server at gw, so that processes started with `ip netns exec` resolve
// through it.
type hosts struct {
	bridge string
	ns     []string
	veth   []string // the machine's end of each host's link, on the bridge
	ip     []string
	gw     string
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// needRoot skips unless the test can make namespaces.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: network namespaces, a bridge and tc need root (CI runs as root)")
	}
	for _, c := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("skipped: the %s command (iproute2) is missing", c)
		}
	}
}

// makeHosts makes n hosts on a new bridge, each egress rate-limited to
// rate by tc tbf (veth.sh's burst and latency), and removes them when the
// test ends. Names and the subnet derive from the process id, so that two
// runs on a machine do not collide.
func makeHosts(t *testing.T, n int, rate string) *hosts {
	t.Helper()
	k := os.Getpid()%200 + 20
	h := &hosts{bridge: fmt.Sprintf("fmmh%d", k), gw: fmt.Sprintf("10.231.%d.254", k)}
	exec.Command("ip", "link", "del", h.bridge).Run() // a leftover of a killed run
	t.Cleanup(func() {
		for _, ns := range h.ns {
			exec.Command("ip", "netns", "del", ns).Run()
			os.RemoveAll(filepath.Join("/etc/netns", ns))
		}
		exec.Command("ip", "link", "del", h.bridge).Run()
	})
	run(t, "ip", "link", "add", h.bridge, "type", "bridge")
	run(t, "ip", "addr", "add", h.gw+"/24", "dev", h.bridge)
	run(t, "ip", "link", "set", h.bridge, "up")
	for i := range n {
		ns := fmt.Sprintf("fmmh%dn%d", k, i)
		veth := fmt.Sprintf("fmmh%dv%d", k, i)
		ip := fmt.Sprintf("10.231.%d.%d", k, i+1)
		exec.Command("ip", "netns", "del", ns).Run()
		h.ns, h.veth, h.ip = append(h.ns, ns), append(h.veth, veth), append(h.ip, ip)
		run(t, "ip", "netns", "add", ns)
		run(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "link", "set", veth, "master", h.bridge)
		run(t, "ip", "link", "set", veth, "up")
		run(t, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		if rate != "" {
			run(t, "tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "131072", "latency", "25ms")
		}
		etc := filepath.Join("/etc/netns", ns)
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver "+h.gw+"\noptions timeout:1 attempts:2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// cut takes host i's link down (its cable pulled); heal puts it back.
func (h *hosts) cut(t *testing.T, i int)  { run(t, "ip", "link", "set", h.veth[i], "down") }
func (h *hosts) heal(t *testing.T, i int) { run(t, "ip", "link", "set", h.veth[i], "up") }

func (h *hosts) ipOf(i int) net.IP { return net.ParseIP(h.ip[i]) }
