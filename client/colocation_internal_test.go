package client

import (
	"net"
	"testing"

	"github.com/feedmesh/feedmesh/api"
)

// TestColocatedWorkers: every live worker on this host's addresses
// (loopback, the host's own, the unspecified address) is co-located;
// one elsewhere, a name instead of an IP, or no live worker is not. Dead
// members and control-only nodes do not count.
func TestColocatedWorkers(t *testing.T) {
	own := net.ParseIP("10.1.2.3")
	isLocal := func(ip net.IP) bool { return ip.IsLoopback() || ip.IsUnspecified() || ip.Equal(own) }
	m := func(addr, status string, worker bool) api.Member {
		return api.Member{Addr: addr, Status: status, Worker: worker}
	}
	alive, dead := api.StatusAlive, api.StatusDead
	for _, tc := range []struct {
		ms   []api.Member
		n    int
		want bool
	}{
		{[]api.Member{m("127.0.0.1:1", alive, true), m("10.1.2.3:2", alive, true), m("[::1]:3", alive, true), m("0.0.0.0:4", alive, true)}, 4, true},
		{[]api.Member{m("127.0.0.1:1", alive, true), m("10.9.9.9:2", dead, true), m("10.9.9.8:3", alive, false)}, 1, true},
		{[]api.Member{m("127.0.0.1:1", alive, true), m("10.9.9.9:2", alive, true)}, 0, false},
		{[]api.Member{m("node-a:1", alive, true)}, 0, false},
		{[]api.Member{m("bad", alive, true)}, 0, false},
		{[]api.Member{m("10.9.9.9:2", dead, true)}, 0, false},
		{nil, 0, false},
	} {
		if n, ok := colocatedWorkers(tc.ms, isLocal); n != tc.n || ok != tc.want {
			t.Errorf("%+v: %d, %v; want %d, %v", tc.ms, n, ok, tc.n, tc.want)
		}
	}
	if !hostIPs()(net.ParseIP("127.0.0.1")) || hostIPs()(net.ParseIP("192.0.2.1")) {
		t.Error("hostIPs: loopback not local, or TEST-NET-1 local")
	}
}
