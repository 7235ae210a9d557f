package client

import (
	"context"
	"fmt"
	"net"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
)

// Options.OffloadColocation's values.
const (
	OffloadColocationDetect = "detect"
	OffloadColocationIgnore = "ignore"
)

// autoColocated applies Options.OffloadColocation to an offload auto
// that has decided nothing yet (no cut adopted or chosen): when every
// live worker node runs on this host, auto runs remote from the start,
// and the local fraction to start with is 0. It returns the fraction.
func (c *Client) autoColocated(ctx context.Context, off *offloadRun, fraction float64) float64 {
	if off == nil || !off.dynamic || off.requested != jobspec.OffloadAuto || off.mode != jobspec.OffloadAuto || off.cut > 0 ||
		c.opts.OffloadColocation == OffloadColocationIgnore {
		return fraction
	}
	ms, err := c.Members(ctx)
	if err != nil {
		return fraction // decided by measurement, as without the rule
	}
	n, ok := colocatedWorkers(ms, hostIPs())
	if !ok {
		return fraction
	}
	off.mode = jobspec.OffloadRemote
	off.reason = fmt.Sprintf("auto: remote, the %d live worker nodes all run on this host (their addresses are its own): a local worker would only take the CPUs they prepare with (Options.OffloadColocation %q decides by measurement instead)", n, OffloadColocationIgnore)
	return 0
}

// colocatedWorkers reports whether every live worker member of ms has an
// address that isLocal says is this host's, and how many there are
// (pure). ok is false without a live worker, or when an address is not
// an IP (a name is not resolved: the nodes advertise IPs).
func colocatedWorkers(ms []api.Member, isLocal func(net.IP) bool) (n int, ok bool) {
	for _, m := range ms {
		if m.Status != api.StatusAlive || !m.Worker {
			continue
		}
		host, _, err := net.SplitHostPort(m.Addr)
		if err != nil {
			return 0, false
		}
		ip := net.ParseIP(host)
		if ip == nil || !isLocal(ip) {
			return 0, false
		}
		n++
	}
	return n, n > 0
}

// hostIPs is this host's addresses as a predicate: loopback, the
// unspecified address (a node listening on every interface), and every
// interface's address. Without the interfaces, only the first two.
func hostIPs() func(net.IP) bool {
	var own []net.IP
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				own = append(own, ipn.IP)
			}
		}
	}
	return func(ip net.IP) bool {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return true
		}
		for _, o := range own {
			if o.Equal(ip) {
				return true
			}
		}
		return false
	}
}
