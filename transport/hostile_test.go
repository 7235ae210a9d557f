package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/quic-go/quic-go"
)

// Hostile-peer tests: an unauthenticated peer (dev TLS lets anyone connect)
// attacks a node's control plane; the node's memory must stay within its
// budgets and a member's control requests must still be served promptly.

// heapInuse returns the heap in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rawPrefix is a frame prefix announcing a header of hl and a tail of tl bytes.
func rawPrefix(hl uint32, tl uint64) []byte {
	p := make([]byte, prefixLen)
	p[0] = frameVersion
	binary.BigEndian.PutUint32(p[1:5], hl)
	binary.BigEndian.PutUint64(p[5:13], tl)
	return p
}

// TestHostileRPCTailsStayWithinBudget: 256 control streams over 2
// connections each announce a request of DefaultMaxRPCRequestBytes and send
// 90 % of it, then stall. The node must not hold more than its RPC byte
// budget (plus QUIC's receive windows and slack) for them. Before requests
// were read as their bytes arrived, the node allocated every announced tail
// up front and the heap grew by 2,057 MiB (+52-59 MiB after).
func TestHostileRPCTailsStayWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("moves ~1.8 GB over loopback")
	}
	for _, tc := range []struct {
		name        string
		streamLimit bool
	}{{"defaults", true}, {"byte budgets alone", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := FastConfig()
			if !tc.streamLimit { // every stream reaches the RPC server
				cfg.MaxRPCStreamsPerConn, cfg.MaxRPCStreamsPerAddr = 256, 256
			}
			rpcTailAttack(t, cfg)
		})
	}
}

func rpcTailAttack(t *testing.T, cfg Config) {
	b := startNode(t, nodeOpts{cfg: &cfg})
	const conns, perConn = 2, 128
	tl := uint64(DefaultMaxRPCRequestBytes - 1)
	sent := make([]byte, tl*9/10)
	head := append(rawPrefix(1, tl), 0xf6) // header: CBOR null

	before := heapInuse()
	attackers := make([]*node, conns)
	for i := range attackers {
		attackers[i] = startNode(t, nodeOpts{noServer: true})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var streams sync.Map
	for _, a := range attackers {
		for range perConn {
			wg.Go(func() {
				s, err := a.t.Dial(ctx, b.addr(), KindControl)
				if err != nil {
					return
				}
				streams.Store(s, struct{}{})
				dl, _ := ctx.Deadline()
				_ = s.SetWriteDeadline(dl)
				if _, err := s.Write(head); err != nil {
					return
				}
				_, _ = s.Write(sent) // blocks once the node stops reading
			})
		}
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	var peak uint64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
sample:
	for {
		select {
		case <-writersDone:
			break sample
		case <-ctx.Done():
			break sample
		case <-tick.C:
			peak = max(peak, heapInuse())
		}
	}
	<-writersDone
	peak = max(peak, heapInuse())
	growth := int64(peak) - int64(before)
	t.Logf("heap in use: %d MiB before, %d MiB at the peak of the attack (+%d MiB)", before>>20, peak>>20, growth>>20)

	// What may grow: the RPC byte budget, the unbudgeted first chunk of each
	// request in service, the receive windows of the two connections (quic-go
	// buffers what the node has not read yet) and the attackers' own state.
	limit := cfg.MaxRPCBytesInFlight + int64(cfg.MaxConcurrentRPCs)*rpcFreeBytes +
		conns*int64(cfg.ConnectionReceiveWindow) + 64<<20
	if growth > limit {
		t.Errorf("heap grew by %d MiB under the attack, budget %d MiB", growth>>20, limit>>20)
	}
	streams.Range(func(k, _ any) bool { k.(*Stream).Close(); return true })
	b.echo(t, b.addr())
}

// TestIdleControlStreamsDoNotStarveMembers: a stranger holding 300 idle
// control streams on one connection must not delay a member's request (from
// another address) by more than a moment. Before per-connection limits, the
// idle streams took every RPC slot until their read timeout and the member's
// echo took 10.0 s (4 ms after).
func TestIdleControlStreamsDoNotStarveMembers(t *testing.T) {
	b := startNode(t, nodeOpts{})
	a := startNode(t, nodeOpts{noServer: true})
	member := startNode(t, nodeOpts{noServer: true, addr: "127.0.0.2:0"})
	var idle []*Stream
	defer func() {
		for _, s := range idle {
			s.Close()
		}
	}()
	for range 300 {
		s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindControl)
		if err != nil {
			break // the node refused further streams: fine
		}
		idle = append(idle, s)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got string
	err := Call(ctx, member.t, member.codec, b.addr(), "echo", "ping", &got)
	d := time.Since(start)
	t.Logf("member's echo with %d idle control streams open: %s", len(idle), d)
	if err != nil || got != "ping" {
		t.Fatalf("member's echo: %q, %v", got, err)
	}
	if d > time.Second {
		t.Errorf("member's echo took %s, want under 1s", d)
	}
}

// TestIdleConnsDoNotLockOutMembers: a stranger opening more idle connections
// than MaxIncomingConns from one address must not keep a member (another
// address) from connecting. Before MaxConnsPerAddr, the member was refused
// ("too many connections").
func TestIdleConnsDoNotLockOutMembers(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxIncomingConns = 48
	cfg.MaxConnsPerAddr = 16
	b := startNode(t, nodeOpts{cfg: &cfg})
	a := startNode(t, nodeOpts{noServer: true})
	member := startNode(t, nodeOpts{noServer: true, addr: "127.0.0.2:0"})
	opened := 0
	for range cfg.MaxIncomingConns + 16 {
		c, err := a.t.dial(testutil.Ctx(t, 3*time.Second), b.addr())
		if err != nil {
			continue
		}
		defer c.CloseWithError(0, "")
		opened++
	}
	t.Logf("stranger opened %d connections", opened)
	start := time.Now()
	err := Call(testutil.Ctx(t, 5*time.Second), member.t, member.codec, b.addr(), "echo", "x", nil)
	d := time.Since(start)
	t.Logf("member's echo: %s, %v", d, err)
	if err != nil {
		t.Fatalf("member's echo with a stranger's idle connections open: %v", err)
	}
	if d > time.Second {
		t.Errorf("member's echo took %s, want under 1s", d)
	}
}

// TestLargeRequestsGiveBudgetBack: requests larger than the unbudgeted first
// buffer take from the byte budgets and give it back; five 6 MiB requests in
// a row fit an 8 MiB per-connection budget only if each returns its share.
func TestLargeRequestsGiveBudgetBack(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxRPCBytesPerConn = DefaultMaxRPCRequestBytes
	b := startNode(t, nodeOpts{cfg: &cfg})
	a := startNode(t, nodeOpts{noServer: true})
	big := string(make([]byte, 6<<20))
	for i := range 5 {
		var got string
		if err := Call(testutil.Ctx(t, 5*time.Second), a.t, a.codec, b.addr(), "echo", big, &got); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if len(got) != len(big) {
			t.Fatalf("request %d: echoed %d bytes, sent %d", i, len(got), len(big))
		}
	}
}

// TestByteBudget: Acquire takes what fits, waits for a Release, and refuses
// what never fits (at once) or does not fit before its context ends.
func TestByteBudget(t *testing.T) {
	b := NewByteBudget("MaxTest", 100)
	within := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}
	var eb *BudgetError
	if err := b.Acquire(within(time.Second), 101); !errors.As(err, &eb) || eb.Err != nil {
		t.Fatalf("took more than the budget: %v", err)
	}
	if err := b.Acquire(context.Background(), 60); err != nil {
		t.Fatalf("60 of 100: %v", err)
	}
	err := b.Acquire(within(20*time.Millisecond), 60)
	if !errors.As(err, &eb) || eb.Name != "MaxTest" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("120 of 100 by the deadline: %v, want a budget error", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Acquire(within(5*time.Second), 60) }()
	b.Release(60)
	if err := <-done; err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if got := b.InUse(); got != 60 {
		t.Fatalf("in use %d, want 60", got)
	}
}

// TestManyStrangersHoldLittle: strangers at two addresses open as many
// connections as MaxConnsPerAddr lets them, and on each a control stream
// announcing a large request and a data stream, both sending without end.
// What the node holds for them is its control-request budgets plus, per
// connection, its state and what QUIC lets a peer send unread (the
// initial receive window: window growth needs the node to read). With a
// node's windows (mesh.DefaultConfig: 64 KiB, growth 48 MiB) the heap,
// the attackers' own state included, stays within the node's bound
// (PeerMemoryBound: 256 MiB at 1024 connections); with a client's (512
// KiB) the windows alone would allow 256 MiB at 512. Both are run and
// logged; the node's is asserted.
func TestManyStrangersHoldLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("512 connections and ~300 MB over loopback")
	}
	var growth [2]int64
	for i, init := range []uint64{512 << 10, 64 << 10} {
		cfg := FastConfig()
		cfg.InitialReceiveWindow, cfg.MaxReceiveWindowBytes = init, 48<<20
		growth[i] = strangersAttack(t, cfg, 2)
		t.Logf("initial window %d KiB: heap +%d MiB", init>>10, growth[i]>>20)
	}
	node := FastConfig()
	node.InitialReceiveWindow, node.MaxReceiveWindowBytes = 64<<10, 48<<20
	if bound := node.PeerMemoryBound(); growth[1] > bound {
		t.Errorf("with a node's windows the heap grew by %d MiB, bound %d MiB", growth[1]>>20, bound>>20)
	}
}

// strangersAttack runs the attack of TestManyStrangersHoldLittle from
// addrs addresses against a node with cfg and returns the heap's growth at
// its peak (the attackers' own state included).
func strangersAttack(t *testing.T, cfg Config, addrs int) int64 {
	b := startNode(t, nodeOpts{cfg: &cfg})
	tl := uint64(DefaultMaxRPCRequestBytes - 1)
	head := append(rawPrefix(1, tl), 0xf6)
	junk := make([]byte, 1<<20)
	before := heapInuse()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []*quic.Conn
	for i := range addrs {
		a := startNode(t, nodeOpts{noServer: true, addr: fmt.Sprintf("127.0.0.%d:0", 10+i)})
		for range cfg.MaxConnsPerAddr {
			c, err := a.t.dial(ctx, b.addr())
			if err != nil {
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			for _, kind := range []StreamKind{KindControl, KindData} {
				wg.Go(func() {
					qs, err := c.OpenStreamSync(ctx)
					if err != nil {
						return
					}
					dl, _ := ctx.Deadline()
					_ = qs.SetWriteDeadline(dl)
					msg := []byte{byte(kind)}
					if kind == KindControl {
						msg = append(msg, head...)
					}
					if _, err := qs.Write(msg); err != nil {
						return
					}
					for ctx.Err() == nil {
						if _, err := qs.Write(junk); err != nil { // blocks once the node stops reading
							return
						}
					}
				})
			}
		}
	}
	var peak uint64
	tick := time.NewTicker(200 * time.Millisecond)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			peak = max(peak, heapInuse())
		case <-ctx.Done():
		}
	}
	tick.Stop()
	wg.Wait()
	for _, c := range conns {
		c.CloseWithError(0, "")
	}
	t.Logf("%d connections from %d addresses", len(conns), addrs)
	return int64(peak) - int64(before)
}
