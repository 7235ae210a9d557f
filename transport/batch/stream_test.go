package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// numbered returns a small batch whose contents depend on i.
func numbered(tb testing.TB, i int, size int) tensor.Element {
	tb.Helper()
	data := make([]byte, size)
	for k := range data {
		data[k] = byte(i + k*31)
	}
	return tensor.Element{Tensors: []tensor.Tensor{
		tensor.ScalarInt64("index", int64(i)),
		{Name: "payload", DType: tensor.Uint8, Shape: []int64{int64(size)}, Data: data},
		tensor.BytesVector("label", [][]byte{fmt.Appendf(nil, "batch-%d", i)}),
	}}
}

func encode(tb testing.TB, codec *transport.Codec, seq int, e tensor.Element) *Frame {
	tb.Helper()
	f, err := Encode(codec, Header{Seq: uint64(seq), Worker: "w1", Epoch: 1}, e)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// checkBatch asserts that a received batch is numbered(i).
func checkBatch(tb testing.TB, h Header, e tensor.Element, i, size int) {
	tb.Helper()
	if h.Seq != uint64(i) || h.Worker != "w1" {
		tb.Fatalf("batch %d: header %+v", i, h)
	}
	if what, ok := equalElements(numbered(tb, i, size), e); !ok {
		tb.Fatalf("batch %d differs in %s", i, what)
	}
}

func TestStreamRoundTripAndEnd(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	for _, tc := range []struct {
		name   string
		endErr error
	}{{"clean", nil}, {"error", errors.New("split 7: decode jpeg: bad huffman table")}} {
		t.Run(tc.name, func(t *testing.T) {
			snd, rcv := p.stream(t, OpenRequest{Job: "j1", Consumer: "c0", Window: 4, Extra: []byte{0xf6}}, 16, Limits{})
			const n, size = 25, 3000
			sent := make(chan error, 1)
			go func() {
				ctx := testutil.Ctx(t, 10*time.Second)
				for i := range n {
					if err := snd.Send(ctx, encode(t, p.worker.Codec, i, numbered(t, i, size))); err != nil {
						sent <- err
						return
					}
					if o := snd.Outstanding(); o > 4 {
						sent <- fmt.Errorf("outstanding %d over the window", o)
						return
					}
				}
				sent <- snd.End(tc.endErr)
			}()
			ctx := testutil.Ctx(t, 10*time.Second)
			for i := range n {
				h, e, err := rcv.Next(ctx)
				if err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				checkBatch(t, h, e, i, size)
			}
			for range 2 { // the end is sticky
				_, _, err := rcv.Next(ctx)
				if tc.endErr == nil && err != io.EOF {
					t.Fatalf("after the last batch: %v, want io.EOF", err)
				}
				var re *RemoteError
				if tc.endErr != nil && (!errors.As(err, &re) || re.Message != tc.endErr.Error()) {
					t.Fatalf("after the last batch: %v, want RemoteError %q", err, tc.endErr)
				}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if rcv.Received() != n {
				t.Fatalf("Received %d, want %d", rcv.Received(), n)
			}
			if err := snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 1))); !errors.Is(err, ErrEnded) {
				t.Fatalf("Send after End: %v, want ErrEnded", err)
			}
		})
	}
}

func TestCreditFlowBoundsOutstanding(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	const window = 3
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: window}, 16, Limits{})
	frame := func(i int) *Frame { return encode(t, p.worker.Codec, i, numbered(t, i, 64<<10)) }

	// The client consumes nothing: exactly window batches go out.
	ctx := testutil.Ctx(t, 10*time.Second)
	for i := range window {
		if err := snd.Send(ctx, frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	if snd.Outstanding() != window {
		t.Fatalf("Outstanding %d, want %d", snd.Outstanding(), window)
	}
	blocked := func() {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		if err := snd.Send(sctx, frame(99)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send beyond the window: %v, want to block until the deadline", err)
		}
		if snd.Outstanding() != window {
			t.Fatalf("Outstanding %d after a blocked Send, want %d", snd.Outstanding(), window)
		}
	}
	blocked()
	// The first Next returns batch 0 and grants nothing: the application holds it.
	h, e, err := rcv.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkBatch(t, h, e, 0, 64<<10)
	blocked()

	// A Send waiting for credit resumes when the client is done with batch 0.
	done := make(chan error, 1)
	go func() { done <- snd.Send(ctx, frame(window)) }()
	h, e, err = rcv.Next(ctx) // credits batch 0, returns batch 1
	if err != nil {
		t.Fatal(err)
	}
	checkBatch(t, h, e, 1, 64<<10)
	if err := <-done; err != nil {
		t.Fatalf("Send after credit: %v", err)
	}
	testutil.WaitFor(t, 5*time.Second, "outstanding back at the window", func() bool { return snd.Outstanding() == window })

	// Drain the rest with the producer running ahead as far as it may.
	go func() {
		for i := window + 1; i < 40; i++ {
			if err := snd.Send(ctx, frame(i)); err != nil {
				done <- err
				return
			}
			if o := snd.Outstanding(); o > window {
				done <- fmt.Errorf("outstanding %d over the window", o)
				return
			}
		}
		done <- snd.End(nil)
	}()
	for i := 2; i < 40; i++ {
		h, e, err := rcv.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, h, e, i, 64<<10)
	}
	if _, _, err := rcv.Next(ctx); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWindowClampedToWorkerMax(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 100}, 2, Limits{})
	if snd.Window() != 2 {
		t.Fatalf("Window %d, want 2", snd.Window())
	}
	ctx := testutil.Ctx(t, 10*time.Second)
	for i := range 2 {
		if err := snd.Send(ctx, encode(t, p.worker.Codec, i, numbered(t, i, 10))); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := snd.Send(sctx, encode(t, p.worker.Codec, 2, numbered(t, 2, 10))); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Send with window 2: %v", err)
	}
	// The failed Send did not break the stream.
	for i := range 2 {
		h, e, err := rcv.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, h, e, i, 10)
	}
	if err := snd.Send(ctx, encode(t, p.worker.Codec, 2, numbered(t, 2, 10))); err != nil {
		t.Fatal(err)
	}
	h, e, err := rcv.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkBatch(t, h, e, 2, 10)
}

// TestSharedFrameManyStreams writes each encoded frame once per stream from
// several goroutines at once, as ephemeral sharing does.
func TestSharedFrameManyStreams(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	const readers, n, size = 4, 30, 20000
	frames := make([]*Frame, n)
	for i := range frames {
		frames[i] = encode(t, p.worker.Codec, i, numbered(t, i, size))
	}
	ctx := testutil.Ctx(t, 20*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 2*readers)
	for r := range readers {
		snd, rcv := p.stream(t, OpenRequest{Job: "shared", Consumer: fmt.Sprint(r), Window: 2 + r}, 8, Limits{})
		wg.Go(func() {
			for _, f := range frames {
				if err := snd.Send(ctx, f); err != nil {
					errs <- err
					return
				}
			}
			errs <- snd.End(nil)
		})
		wg.Go(func() {
			for i := range n {
				h, e, err := rcv.Next(ctx)
				if err != nil {
					errs <- fmt.Errorf("reader %d batch %d: %w", r, i, err)
					return
				}
				if what, ok := equalElements(numbered(t, i, size), e); !ok || h.Seq != uint64(i) {
					errs <- fmt.Errorf("reader %d batch %d differs in %s", r, i, what)
					return
				}
			}
			if _, _, err := rcv.Next(ctx); err != io.EOF {
				errs <- fmt.Errorf("reader %d end: %v", r, err)
				return
			}
			errs <- nil
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestWorkerVanishes(t *testing.T) {
	for _, how := range []string{"transport closed", "socket blackholed"} {
		t.Run(how, func(t *testing.T) {
			p := newFaultyPair(t, transport.FastConfig())
			snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 2}, 4, Limits{})
			ctx := testutil.Ctx(t, 10*time.Second)
			if err := snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 100))); err != nil {
				t.Fatal(err)
			}
			if _, _, err := rcv.Next(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if how == "transport closed" {
				p.worker.Close()
			} else {
				p.worker.Fault.On.Store(true)
			}
			_, _, err := rcv.Next(ctx)
			if err == nil || err == io.EOF || ctx.Err() != nil {
				t.Fatalf("Next after the worker vanished: %v (ctx %v)", err, ctx.Err())
			}
			if el := time.Since(start); el > 4*time.Second {
				t.Fatalf("Next took %s to notice", el)
			}
			t.Logf("noticed after %s: %v", time.Since(start).Round(time.Millisecond), err)
			if _, _, again := rcv.Next(ctx); again == nil {
				t.Fatal("Next succeeded after failing")
			}
			snd.Close()
			p.worker.Close() // the blackholed transport too, before goleak looks
		})
	}
}

func TestClientGoneFailsSendFast(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	for _, waiting := range []bool{false, true} {
		snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 1}, 4, Limits{})
		ctx := testutil.Ctx(t, 10*time.Second)
		if waiting { // the Send is blocked on credit when the client leaves
			if err := snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10))); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() {
			var err error
			for i := 0; err == nil && i < 1000; i++ {
				err = snd.Send(ctx, encode(t, p.worker.Codec, i, numbered(t, i, 10)))
			}
			done <- err
		}()
		if !waiting {
			_, _, _ = rcv.Next(ctx)
		}
		rcv.Close()
		start := time.Now()
		err := <-done
		if !errors.Is(err, ErrClientGone) {
			t.Fatalf("waiting=%v: Send after the client closed: %v, want ErrClientGone", waiting, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("Send took %s to fail", el)
		}
		if _, _, err := rcv.Next(ctx); !errors.Is(err, ErrReceiverClosed) {
			t.Fatalf("Next after Close: %v", err)
		}
		snd.Close()
	}
}

func TestSenderCloseWithoutEnd(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 2}, 4, Limits{})
	ctx := testutil.Ctx(t, 5*time.Second)
	if err := snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10))); err != nil {
		t.Fatal(err)
	}
	snd.Close()
	if _, _, err := rcv.Next(ctx); err != nil {
		t.Fatalf("batch sent before Close: %v", err)
	}
	if _, _, err := rcv.Next(ctx); err == nil || err == io.EOF {
		t.Fatalf("stream closed without End: %v, want an error", err)
	}
	if err := snd.Send(ctx, encode(t, p.worker.Codec, 1, numbered(t, 1, 10))); !errors.Is(err, ErrSenderClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

func TestNextContextBetweenBatchesKeepsStream(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 1}, 4, Limits{})
	ctx := testutil.Ctx(t, 10*time.Second)
	timedOut := func() {
		t.Helper()
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := rcv.Next(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next with nothing sent: %v, want DeadlineExceeded", err)
		}
	}
	next := func(i int) {
		t.Helper()
		h, e, err := rcv.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, h, e, i, 10)
	}
	send := func(i int) {
		t.Helper()
		if err := snd.Send(ctx, encode(t, p.worker.Codec, i, numbered(t, i, 10))); err != nil {
			t.Fatal(err)
		}
	}
	timedOut()
	send(0)
	next(0)
	timedOut() // grants the credit for batch 0, then times out
	testutil.WaitFor(t, 3*time.Second, "credit for batch 0", func() bool { return snd.Outstanding() == 0 })
	// Retries grant nothing more: the worker would take an extra credit as a
	// protocol violation and fail the next Send.
	timedOut()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := rcv.Next(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled ctx: %v", err)
	}
	send(1)
	next(1)
	done := make(chan error, 1)
	go func() { done <- snd.Send(ctx, encode(t, p.worker.Codec, 2, numbered(t, 2, 10))) }()
	next(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBadOpenRequests(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 5*time.Second)
	if _, err := Open(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Window: 0}, Limits{}); err == nil {
		t.Fatal("Open with Window 0 succeeded")
	}
	raw := func(m *wireMsg) net.Conn {
		s, err := p.client.T.Dial(ctx, p.worker.Addr(), transport.KindData)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if m != nil {
			if err := p.client.Codec.WriteFrame(s, m); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	accept := func(ctx context.Context) error {
		c, err := p.worker.T.Listener(transport.KindData).Accept()
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Accept(ctx, p.worker.Codec, c, 4)
		return err
	}
	// Window 0 from a raw client: refused, and the client reads why.
	c := raw(&wireMsg{Kind: kindOpen, Version: ProtocolVersion, Job: "j", Window: 0})
	if err := accept(ctx); err == nil {
		t.Fatal("Accept took Window 0")
	}
	var m wireMsg
	if _, err := readMsg(p.client.Codec, c, &m, Limits{}, bufs{}); err != nil || m.Kind != kindEnd || !m.Failed {
		t.Fatalf("client got %+v, %v; want an error End", m, err)
	}
	// A credit before the open request.
	raw(&wireMsg{Kind: kindCredit, Credits: 1})
	if err := accept(ctx); !errors.Is(err, ErrMalformedBatch) {
		t.Fatalf("credit first: %v", err)
	}
	// A silent client: Accept gives up at its deadline.
	raw(nil)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := accept(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent client: %v", err)
	}
}

func TestClientOverGrantingCreditIsCutOff(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 5*time.Second)
	s, snd := p.rawClient(t, wireMsg{Kind: kindOpen, Version: ProtocolVersion, Window: 1}, 4)
	// Credits for batches never sent: a protocol violation.
	if err := p.client.Codec.WriteFrame(s, &wireMsg{Kind: kindCredit, Credits: 1000}); err != nil {
		t.Fatal(err)
	}
	var serr error
	testutil.WaitFor(t, 3*time.Second, "Send to fail", func() bool {
		serr = snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10)))
		return serr != nil
	})
	if !errors.Is(serr, ErrClientGone) || !errors.Is(serr, ErrMalformedBatch) {
		t.Fatalf("Send after over-granting: %v", serr)
	}
}

func TestCloseInterruptsBlockedCalls(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 1}, 4, Limits{})
	ctx := testutil.Ctx(t, 10*time.Second)

	// Next blocked waiting for a batch; Receiver.Close interrupts it.
	next := make(chan error, 1)
	go func() {
		_, _, err := rcv.Next(ctx)
		next <- err
	}()
	// Send one batch so the sender has no credit left, then block on the next.
	if err := snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10))); err != nil {
		t.Fatal(err)
	}
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _, err := rcv.Next(context.Background()) // credits batch 0, then waits
		next <- err
	}()
	testutil.WaitFor(t, 3*time.Second, "credit for batch 0", func() bool { return snd.Outstanding() == 0 })
	rcv.Close()
	select {
	case err := <-next:
		if !errors.Is(err, ErrReceiverClosed) {
			t.Fatalf("Next interrupted by Close: %v, want ErrReceiverClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not interrupt Next")
	}

	// Send blocked on credit; Sender.Close interrupts it.
	snd2, _ := p.stream(t, OpenRequest{Job: "j2", Window: 1}, 4, Limits{})
	if err := snd2.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10))); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() { sent <- snd2.Send(context.Background(), encode(t, p.worker.Codec, 1, numbered(t, 1, 10))) }()
	snd2.Close()
	select {
	case err := <-sent:
		if !errors.Is(err, ErrSenderClosed) {
			t.Fatalf("Send interrupted by Close: %v, want ErrSenderClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not interrupt Send")
	}
}
