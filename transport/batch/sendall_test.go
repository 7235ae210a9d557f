package batch

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/transport"
)

// countingConn counts the writes, and their bytes, that reach the stream.
type countingConn struct {
	net.Conn
	writes, bytes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	n, err := c.Conn.Write(p)
	c.bytes.Add(int64(n))
	return n, err
}

// SendAll delivers every frame in order, takes no more credit than the
// client granted (it waits for more mid-way), and writes a run of small
// frames in far fewer stream writes than frames.
func TestSendAllCoalescesWithinCredit(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 10*time.Second)
	var cc *countingConn
	snd, rcv := p.streamWith(t, OpenRequest{Job: "j", Window: 8}, 64, ReceiverConfig{Limits: DefaultLimits()},
		func(c net.Conn) net.Conn { cc = &countingConn{Conn: c}; return cc })
	if got := snd.Available(); got != 8 {
		t.Fatalf("Available before sending: %d, want the window 8", got)
	}
	const n, size = 40, 1000
	fs := make([]*Frame, n)
	for i := range fs {
		fs[i] = encode(t, p.worker.Codec, i, numbered(t, i, size))
	}
	done := sendAllThenEnd(ctx, snd, fs)
	for i := range n {
		h, e, err := rcv.Next(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		checkBatch(t, h, e, i, size)
		if out := snd.Outstanding(); out > 8 {
			t.Fatalf("%d batches outstanding with a window of 8", out)
		}
	}
	if _, _, err := rcv.Next(ctx); err == nil {
		t.Fatal("no end after the last batch")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 40 frames under a window of 8: at least 5 writes, and far fewer than
	// one per frame (End is one more).
	if w := cc.writes.Load(); w < 5 || w > n/2 {
		t.Fatalf("%d stream writes for %d small frames", w, n)
	}
	t.Logf("%d frames in %d stream writes", n, cc.writes.Load())
}

// sendAllThenEnd sends fs with one SendAll, then End, from another
// goroutine; the channel gets the first error (or a short send's).
func sendAllThenEnd(ctx context.Context, snd *Sender, fs []*Frame) <-chan error {
	done := make(chan error, 1)
	go func() {
		sent, err := snd.SendAll(ctx, fs)
		if err == nil && sent != len(fs) {
			err = fmt.Errorf("SendAll sent %d of %d frames", sent, len(fs))
		}
		if err == nil {
			err = snd.End(nil)
		}
		done <- err
	}()
	return done
}
