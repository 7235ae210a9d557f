package batch

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/transport"
)

// With WindowBytes the window grows while batches are small (up to the
// worker's cap), shrinks back when they get large (never below the opened
// Window), and the batches outstanding never exceed the receiver's window.
func TestWindowBytesGrowsAndShrinks(t *testing.T) {
	const small, large = 1000, 8000
	for _, tc := range []struct {
		name      string
		workerMax int
		wantGrown int // at least
	}{{"worker cap 64", 64, 8}, {"worker cap 6", 6, 6}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, transport.FastConfig())
			ctx := testutil.Ctx(t, 20*time.Second)
			snd, rcv := p.streamWith(t, OpenRequest{Job: "j", Window: 2}, tc.workerMax, ReceiverConfig{WindowBytes: 16 * small}, nil)
			const nSmall, nLarge = 100, 60
			sizeOf := func(i int) int {
				if i < nSmall {
					return small
				}
				return large
			}
			done := make(chan error, 1)
			go func() {
				for i := range nSmall + nLarge {
					if err := snd.Send(ctx, encode(t, p.worker.Codec, i, numbered(t, i, sizeOf(i)))); err != nil {
						done <- err
						return
					}
				}
				done <- snd.End(nil)
			}()
			grown := 0
			for i := range nSmall + nLarge {
				h, e, err := rcv.Next(ctx)
				if err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				checkBatch(t, h, e, i, sizeOf(i))
				if in := snd.Outstanding() - int(rcv.withheld); in > rcv.window+1 {
					t.Fatalf("batch %d: %d outstanding beyond the %d withheld, window %d", i, in, rcv.withheld, rcv.window)
				}
				if rcv.window > tc.workerMax || snd.Window() > tc.workerMax {
					t.Fatalf("window %d (worker's %d) above the worker's cap %d", rcv.window, snd.Window(), tc.workerMax)
				}
				if i == nSmall-1 {
					grown = rcv.window
				}
			}
			if _, _, err := rcv.Next(ctx); err == nil {
				t.Fatal("no end")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if grown < tc.wantGrown {
				t.Fatalf("window after %d small batches: %d, want ≥ %d", nSmall, grown, tc.wantGrown)
			}
			if rcv.window > 3 || rcv.window < 2 {
				t.Fatalf("window after %d large batches: %d, want back near the opened 2", nLarge, rcv.window)
			}
			t.Logf("window: opened 2, grown to %d on small batches, %d on large ones (worker's view %d, %d withheld)", grown, rcv.window, snd.Window(), rcv.withheld)
		})
	}
}

// A worker's Accept may only clamp the window asked for, and must speak the
// version asked for: one that raises the window, has a cap below its window,
// or names another version, breaks the stream with ErrMalformedBatch.
func TestBadAcceptIsMalformed(t *testing.T) {
	for _, tc := range []struct {
		name           string
		window, maxWin int
		version        uint16
	}{{"window above the one asked for", 5, 64, ProtocolVersion}, {"cap below the window", 2, 1, ProtocolVersion}, {"zero window", 0, 64, ProtocolVersion},
		{"another version", 4, 64, ProtocolVersion + 1}, {"no version", 4, 64, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, transport.FastConfig())
			ctx := testutil.Ctx(t, 5*time.Second)
			rcv, err := Open(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Job: "j", Window: 4}, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			c, err := p.worker.T.Listener(transport.KindData).Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var open wireMsg
			if _, err := readMsg(p.worker.Codec, c, &open, Limits{}, bufs{}); err != nil || open.Kind != kindOpen || open.Version != ProtocolVersion {
				t.Fatalf("open: %+v, %v", open, err)
			}
			if err := p.worker.Codec.WriteFrame(c, &wireMsg{Kind: kindAccept, Version: tc.version, Window: tc.window, MaxWindow: tc.maxWin}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := rcv.Next(ctx); !errors.Is(err, ErrMalformedBatch) {
				t.Fatalf("Next after a bad accept: %v, want ErrMalformedBatch", err)
			}
		})
	}
}

// A credit message with a negative growth, a growth above the worker's cap,
// or neither credit nor growth, breaks the stream: the worker's next Send
// fails.
func TestBadCreditGrowthIsCutOff(t *testing.T) {
	// The worker's cap is 4: growth beyond it (or overflowing) is refused.
	for _, m := range []wireMsg{{Kind: kindCredit, Credits: 0, Grow: -3}, {Kind: kindCredit}, {Kind: kindCredit, Grow: 5}, {Kind: kindCredit, Grow: math.MaxInt64}} {
		p := newPair(t, transport.FastConfig())
		ctx := testutil.Ctx(t, 5*time.Second)
		s, snd := p.rawClient(t, wireMsg{Kind: kindOpen, Version: ProtocolVersion, Window: 1}, 4)
		if err := p.client.Codec.WriteFrame(s, &m); err != nil {
			t.Fatal(err)
		}
		var serr error
		testutil.WaitFor(t, 3*time.Second, "Send to fail", func() bool {
			serr = snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10)))
			return serr != nil
		})
		if !errors.Is(serr, ErrMalformedBatch) {
			t.Fatalf("credit %+v: Send: %v, want ErrMalformedBatch", m, serr)
		}
	}
}

// Every client gets the Accept first, naming the version in force, then
// the batches.
func TestAcceptComesFirst(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 5*time.Second)
	s, snd := p.rawClient(t, wireMsg{Kind: kindOpen, Version: ProtocolVersion, Window: 2}, 4)
	if err := snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10))); err != nil {
		t.Fatal(err)
	}
	var m wireMsg
	if _, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{}); err != nil || m.Kind != kindAccept || m.Version != ProtocolVersion || m.Window != 2 || m.MaxWindow != 4 {
		t.Fatalf("first message: %+v, %v; want an Accept of v%d, window 2, cap 4", m, err, ProtocolVersion)
	}
	m = wireMsg{}
	if _, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{}); err != nil || m.Kind != kindBatch {
		t.Fatalf("second message: %s, %v; want a batch", m.Kind, err)
	}
}
