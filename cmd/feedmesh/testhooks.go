//go:build feedmesh_testhooks

package main

// Test hooks, compiled only with -tags feedmesh_testhooks (the multi-host
// system test builds the binary so; the product binary has none of this):
// FEEDMESH_TESTHOOK_DELAY_FILE names a file holding "BASE JITTER" (Go
// durations, e.g. "2ms 1ms"), read again every 100 ms, and the node's
// receive side holds each QUIC datagram (Raft, control, data) and each
// gossip packet for BASE ± JITTER (internal/slowlink.Delay), so that nodes
// in network namespaces of one machine see the delay of a link between
// hosts; this kernel has no netem qdisc to add it on the interface.
// Gossip's TCP streams (push/pull, the join) are not delayed.

import (
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/internal/slowlink"
	"github.com/feedmesh/feedmesh/mesh"
)

func init() {
	file := os.Getenv("FEEDMESH_TESTHOOK_DELAY_FILE")
	if file == "" {
		return
	}
	var base, jitter atomic.Int64
	read := func() {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			if d, err := time.ParseDuration(f[0]); err == nil {
				base.Store(int64(d))
			}
		}
		if len(f) > 1 {
			if d, err := time.ParseDuration(f[1]); err == nil {
				jitter.Store(int64(d))
			}
		} else {
			jitter.Store(0)
		}
	}
	read()
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			read()
		}
	}()
	delay := func() (time.Duration, time.Duration) {
		return time.Duration(base.Load()), time.Duration(jitter.Load())
	}
	nodeHooks = append(nodeHooks, func(c *mesh.Config) {
		c.WrapPacketConn = func(pc net.PacketConn) net.PacketConn { return slowlink.NewDelay(pc, delay) }
		c.WrapGossipTransport = func(t memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			return newDelayedGossip(t, delay)
		}
	})
}

// delayedGossip hands memberlist its packets after the delay, in order.
type delayedGossip struct {
	memberlist.NodeAwareTransport
	out chan *memberlist.Packet
}

type stamped struct {
	p  *memberlist.Packet
	at time.Time
}

func newDelayedGossip(t memberlist.NodeAwareTransport, delay slowlink.DelayFunc) *delayedGossip {
	g := &delayedGossip{NodeAwareTransport: t, out: make(chan *memberlist.Packet)}
	q := make(chan stamped, 4096)
	go func() {
		var last time.Time
		for p := range t.PacketCh() {
			base, jitter := delay()
			at := slowlink.At(time.Now(), last, base, jitter)
			select {
			case q <- stamped{p, at}:
				last = at
			default: // dropped, as a full queue drops
			}
		}
	}()
	go func() {
		for s := range q {
			if wait := time.Until(s.at); wait > 0 {
				time.Sleep(wait)
			}
			s.p.Timestamp = time.Now()
			g.out <- s.p
		}
	}()
	return g
}

func (g *delayedGossip) PacketCh() <-chan *memberlist.Packet { return g.out }
