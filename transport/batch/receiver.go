package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// ErrReceiverClosed is returned by Next after Close.
var ErrReceiverClosed = errors.New("receiver closed")

// ReceiverConfig tunes a Receiver beyond Open's arguments.
type ReceiverConfig struct {
	// Limits bound what the receiver accepts in batch headers (zero fields:
	// DefaultLimits). The codec bounds header and frame size.
	Limits Limits
	// Alloc, when set, supplies the buffer each batch's tail is read into
	// (called with the exact length; must return at least that capacity), so a
	// client can pool batch buffers. The returned element's tensors live in
	// it. Nil allocates a new buffer per batch.
	Alloc func(n int) []byte
}

// Receiver is the client side of one batch stream. Next is meant for one
// goroutine; Close may be called concurrently with it.
type Receiver struct {
	codec *transport.Codec
	ctl   *transport.Codec
	s     net.Conn
	addr  string
	cfg   ReceiverConfig

	// Owned by the goroutine calling Next.
	holding    bool   // the application holds the last batch Next returned
	owed       int64  // credits owed to the worker, not yet written
	creditsOff bool   // the worker stopped reading credits (it ended or is gone)
	received   uint64 // batches received
	err        error  // sticky: io.EOF, *RemoteError or a failure
	rc         countingReader

	closeMu sync.Mutex
	closed  bool
}

// Open dials a KindData stream to the worker at addr and sends req, which
// grants req.Window credits up front (at least 1). Batch headers are checked
// against lim. It does not wait for the worker's answer: a worker refusing
// the request ends the stream, which the first Next reports.
func Open(ctx context.Context, tr *transport.Transport, codec *transport.Codec, addr string, req OpenRequest, lim Limits) (*Receiver, error) {
	return OpenConfig(ctx, tr, codec, addr, req, ReceiverConfig{Limits: lim})
}

// OpenConfig is Open with a ReceiverConfig.
func OpenConfig(ctx context.Context, tr *transport.Transport, codec *transport.Codec, addr string, req OpenRequest, cfg ReceiverConfig) (*Receiver, error) {
	if req.Window < 1 {
		return nil, fmt.Errorf("open batch stream to %s: Window is %d, must be at least 1", addr, req.Window)
	}
	s, err := tr.Dial(ctx, addr, transport.KindData)
	if err != nil {
		return nil, fmt.Errorf("open batch stream: %w", err)
	}
	r := &Receiver{codec: codec, ctl: codec.WithMaxFrame(controlFrameBytes), s: s, addr: addr, cfg: cfg}
	r.rc.r = s
	m := wireMsg{Kind: kindOpen, Job: req.Job, Consumer: req.Consumer, Window: req.Window, OpenExtra: req.Extra}
	stop := interruptOn(ctx, s.SetWriteDeadline)
	err = r.ctl.WriteFrame(s, &m)
	stop()
	if err != nil {
		resetStream(s)
		return nil, fmt.Errorf("open batch stream to %s: send request: %w", addr, err)
	}
	return r, nil
}

// Next returns the next batch. After a clean End it returns io.EOF, after an
// error End a *RemoteError with the worker's message; if the stream breaks
// (worker vanished: within the transport's MaxIdleTimeout; malformed data:
// ErrMalformedBatch) it returns that error. Once it has returned one of
// these, it keeps returning it.
//
// Credit rule: the Window credits of the OpenRequest cover the first Window
// batches. Every call to Next that follows a call which returned a batch
// first grants one credit back, for that batch, which the application has
// finished with. So the batches the worker has sent and not had credited —
// in flight, in transport buffers, and the one the application holds — never
// exceed Window. A call that returns a ctx error before any byte of the next
// batch arrived leaves the stream usable and grants nothing more on the retry;
// a ctx ending mid-batch breaks the stream.
func (r *Receiver) Next(ctx context.Context) (Header, tensor.Element, error) {
	if r.isClosed() {
		return Header{}, tensor.Element{}, fmt.Errorf("next batch: %w", ErrReceiverClosed)
	}
	if r.err != nil {
		return Header{}, tensor.Element{}, r.err
	}
	if err := ctx.Err(); err != nil {
		return Header{}, tensor.Element{}, fmt.Errorf("next batch from %s: %w", r.addr, err)
	}
	if r.holding {
		r.holding = false
		r.owed++
	}
	stop := interruptOn(ctx, r.s.SetDeadline)
	defer stop()
	if r.owed > 0 && !r.creditsOff {
		if err := r.ctl.WriteFrame(r.s, &wireMsg{Kind: kindCredit, Credits: r.owed}); err == nil {
			r.owed = 0
		} else if ctx.Err() != nil || r.isClosed() {
			// The credit frame may be half written.
			return r.fail(fmt.Errorf("next batch from %s: grant credit: %w (%w)", r.addr, err, cause(ctx, r)))
		} else {
			// The worker stopped reading credits: it has ended the stream or
			// is gone. Either way the read below tells which.
			r.creditsOff = true
		}
	}
	r.rc.n = 0
	var m wireMsg
	e, err := readMsg(r.codec, &r.rc, &m, r.cfg.Limits, r.cfg.Alloc)
	if err != nil {
		if ctx.Err() != nil && r.rc.n == 0 && !r.isClosed() {
			return Header{}, tensor.Element{}, fmt.Errorf("next batch from %s: %w", r.addr, ctx.Err())
		}
		if err == io.EOF {
			err = fmt.Errorf("%w: stream ended without End: %w", ErrMalformedBatch, io.ErrUnexpectedEOF)
		}
		if ctx.Err() != nil || r.isClosed() {
			err = fmt.Errorf("%w (%w)", err, cause(ctx, r))
		}
		return r.fail(fmt.Errorf("next batch from %s: %w", r.addr, err))
	}
	switch m.Kind {
	case kindBatch:
		r.received++
		r.holding = true
		return m.header(), e, nil
	case kindEnd:
		if m.Failed {
			r.err = &RemoteError{Message: m.Error}
		} else if m.Sent != r.received {
			return r.fail(malformed("end of stream from %s after %d batches, but %d were sent", r.addr, r.received, m.Sent))
		} else {
			r.err = io.EOF
		}
		r.s.Close()
		return Header{}, tensor.Element{}, r.err
	}
	return r.fail(malformed("unexpected %s message from worker %s", m.Kind, r.addr))
}

// cause names why an operation was interrupted: Close or ctx.
func cause(ctx context.Context, r *Receiver) error {
	if r.isClosed() {
		return ErrReceiverClosed
	}
	return ctx.Err()
}

// fail makes err sticky and resets the stream.
func (r *Receiver) fail(err error) (Header, tensor.Element, error) {
	r.err = err
	resetStream(r.s)
	return Header{}, tensor.Element{}, err
}

// Received returns the batches Next has returned so far.
func (r *Receiver) Received() uint64 { return r.received }

// Close closes the stream; the worker's Send fails with ErrClientGone. It may
// be called concurrently with Next, which it interrupts, and is idempotent.
func (r *Receiver) Close() error {
	r.closeMu.Lock()
	if r.closed {
		r.closeMu.Unlock()
		return nil
	}
	r.closed = true
	r.closeMu.Unlock()
	return r.s.Close()
}

func (r *Receiver) isClosed() bool {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	return r.closed
}

// countingReader counts the bytes read, so Next knows whether a ctx
// interruption happened between frames.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
