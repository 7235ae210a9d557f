package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// ErrReceiverClosed is returned by Next after Close.
var ErrReceiverClosed = errors.New("receiver closed")

// ErrPaused ends a stream whose worker's process drained before a graceful
// shutdown (Sender.EndPaused): everything it sent arrived, and its next
// process may bring more of the job. It is io.EOF too.
var ErrPaused = fmt.Errorf("worker drained its part of the job for now: %w", io.EOF)

// ReceiverConfig tunes a Receiver beyond Open's arguments.
type ReceiverConfig struct {
	// Limits bound what the receiver accepts in batch headers (zero fields:
	// DefaultLimits). The codec bounds header and frame size.
	Limits Limits
	// Alloc, when set, supplies the buffers the returned batches live in:
	// each batch's tail, or for a batch with unpadded tensors the buffers
	// those are re-padded into (its tail then goes to a buffer the Receiver
	// reuses, up to 1 MiB, and its other tensors are copied out). Called with the
	// exact length; must return at least that capacity; the bytes need not
	// be zero. So a client can pool batch buffers. Nil allocates new
	// buffers per batch.
	Alloc func(n int) []byte
	// WindowBytes, when positive, sizes the credit window by bytes as well
	// as batches: the receiver keeps Window × (mean batch bytes) near
	// WindowBytes by growing the window above the OpenRequest's Window
	// (never below it), up to MaxWindow batches, and shrinking it back when
	// batches get larger. Small batches then have enough in flight to hide
	// the round trip of their credits, and large ones keep the Window.
	// Shrinking cannot take back credit already granted: after a run of
	// small batches, up to the grown window of large ones may still come
	// (the QUIC stream receive window bounds their bytes). Zero: the window
	// stays as opened.
	WindowBytes int64
	// MaxWindow caps a window grown by WindowBytes, in batches (the worker
	// also caps it, at its Worker.MaxWindow). Default DefaultMaxWindow.
	MaxWindow int
}

// DefaultWindowBytes is the WindowBytes of the client: batches of 1 MiB and
// more keep a Window of 4; 64 KiB batches get 64.
const DefaultWindowBytes = 4 << 20

// DefaultMaxWindow is the default cap of a grown window, the worker's
// default cap (mesh.WorkerConfig.MaxWindow).
const DefaultMaxWindow = 64

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
	window     int    // the window as the worker sees it, minus withheld
	minWindow  int    // the OpenRequest's Window
	workerMax  int    // the worker's cap on the window, from its Accept; 0: not yet known
	withheld   int64  // credits kept back to shrink a grown window
	meanBytes  int64  // moving average of batch bytes (WindowBytes)
	creditsOff bool   // the worker stopped reading credits (it ended or is gone)
	received   uint64 // batches received
	lastWire   int64  // bytes the last batch took on the stream
	err        error  // sticky: io.EOF, *RemoteError or a failure
	rc         countingReader
	// scratch is the reused tail buffer of batches with unpadded tensors:
	// those are re-padded into buffers of their own (cfg.Alloc's or new)
	// and the other tensors copied out, so nothing Next returns references
	// it.
	scratch  []byte
	cur      *wireMsg // the message being read, for allocTail
	tailUsed bool     // scratch was handed out for the current message
	// wire is the reused buffer compressed tails are read into (up to
	// maxScratchBytes; they are decompressed out of it at once).
	wire    []byte
	comp    Compression // the compression in force, from the worker's Accept
	version uint16      // the protocol version in force, from the worker's Accept
	// names caches the tensor names and worker ids of recent headers.
	names fastNames

	closeMu sync.Mutex
	closed  bool
}

// Open dials a KindData stream to the worker at addr and sends req, which
// grants req.Window credits up front (at least 1), in protocol version
// ProtocolVersion. Batch headers are checked against lim. It does not wait
// for the worker's answer: a worker refusing the request ends the stream,
// which the first Next reports (a *VersionError when the worker does not
// speak ProtocolVersion).
func Open(ctx context.Context, tr *transport.Transport, codec *transport.Codec, addr string, req OpenRequest, lim Limits) (*Receiver, error) {
	return OpenConfig(ctx, tr, codec, addr, req, ReceiverConfig{Limits: lim})
}

// OpenConfig is Open with a ReceiverConfig.
func OpenConfig(ctx context.Context, tr *transport.Transport, codec *transport.Codec, addr string, req OpenRequest, cfg ReceiverConfig) (*Receiver, error) {
	if req.Window < 1 {
		return nil, fmt.Errorf("open batch stream to %s: Window is %d, must be at least 1", addr, req.Window)
	}
	if !req.Compression.Valid() {
		return nil, fmt.Errorf("open batch stream to %s: unknown %v", addr, req.Compression)
	}
	s, err := tr.Dial(ctx, addr, transport.KindData)
	if err != nil {
		return nil, fmt.Errorf("open batch stream: %w", err)
	}
	if cfg.MaxWindow <= 0 {
		cfg.MaxWindow = DefaultMaxWindow
	}
	r := &Receiver{codec: codec, ctl: codec.WithMaxFrame(controlFrameBytes), s: s, addr: addr, cfg: cfg, window: req.Window, minWindow: req.Window}
	r.rc.r = s
	m := wireMsg{Kind: kindOpen, Version: ProtocolVersion, Job: req.Job, Consumer: req.Consumer, Window: req.Window, OpenExtra: req.Extra, Comp: req.Compression, JobID: req.JobID, Token: req.Token, Capability: req.Capability}
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
// error End a *RemoteError with the worker's message, after a worker refused
// the stream's protocol version an error wrapping a *VersionError
// (ErrUnsupportedVersion); if the stream breaks
// (worker vanished: within the transport's MaxIdleTimeout; malformed data:
// ErrMalformedBatch) it returns that error. Once it has returned one of
// these, it keeps returning it.
//
// Credit rule: the Window credits of the OpenRequest cover the first Window
// batches. Every call to Next that follows a call which returned a batch
// owes one credit back, for that batch, which the application has finished
// with. Until the worker's Accept is read (before the first batch) each credit
// is granted at once; after it, credits are granted in groups of a quarter
// of the window, the window may grow or shrink with WindowBytes (never below
// the opened Window, never above the worker's cap), and credits withheld
// shrink it. So the batches the worker has sent and not had credited — in
// flight, in transport buffers, and the one the application holds — never
// exceed the window. A call that returns a ctx error before any byte of the next
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
	if credits, grow := r.plan(); credits+grow > 0 && !r.creditsOff {
		if err := r.grant(ctx, credits, grow); err != nil {
			return r.fail(err)
		}
	}
	r.rc.n = 0
	var m wireMsg
	// The tail may go to the reused scratch buffer; the re-padded tensors
	// never do: they are what Next returns.
	b := bufs{tail: r.allocTail, pad: r.cfg.Alloc, wire: r.allocWire}
	m.names = &r.names
	r.cur, r.tailUsed = &m, false
	e, err := readMsg(r.codec, &r.rc, &m, r.cfg.Limits, b)
	if err == nil && r.workerMax == 0 && m.Kind != kindEnd {
		// The worker answers an Open with its Accept, or refuses it with
		// an End.
		if err := r.accept(&m); err != nil {
			return r.fail(err)
		}
		r.rc.n = 0
		m = wireMsg{names: &r.names}
		e, err = readMsg(r.codec, &r.rc, &m, r.cfg.Limits, b)
	}
	if err == nil && r.tailUsed {
		detachFromTail(&e, &m)
	}
	if err != nil {
		return r.readFailed(ctx, err)
	}
	switch m.Kind {
	case kindBatch:
		r.received++
		r.lastWire = r.rc.n
		if r.cfg.WindowBytes > 0 {
			n := int64(e.ByteSize())
			if r.received == 1 {
				r.meanBytes = n
			} else {
				r.meanBytes += (n - r.meanBytes) / 8
			}
		}
		r.holding = true
		return m.header(), e, nil
	case kindEnd:
		return r.end(&m)
	}
	return r.fail(malformed("unexpected %s message from worker %s", m.Kind, r.addr))
}

// grant writes the credit message plan decided on, before Next reads. An
// error breaks the stream: the frame may be half written.
func (r *Receiver) grant(ctx context.Context, credits, grow int64) error {
	err := r.ctl.WriteFrame(r.s, &wireMsg{Kind: kindCredit, Credits: credits, Grow: grow})
	switch {
	case err == nil:
		r.owed -= credits
		r.window += int(grow)
	case ctx.Err() != nil || r.isClosed():
		return fmt.Errorf("next batch from %s: grant credit: %w (%w)", r.addr, err, cause(ctx, r))
	default:
		// The worker stopped reading credits: it has ended the stream or
		// is gone. Either way Next's read tells which.
		r.creditsOff = true
	}
	return nil
}

// accept takes in the worker's first answer to the Open, m, which is not
// an End: its Accept, with the window it granted (at most the one asked
// for), its cap on the window, and the version and compression in force.
func (r *Receiver) accept(m *wireMsg) error {
	if m.Kind == kindBatch {
		// A worker from before protocol versions sends no Accept
		// and starts with the batches: say what to upgrade.
		return fmt.Errorf("open batch stream to %s: %w", r.addr, &VersionError{Client: ProtocolVersion})
	}
	if m.Kind != kindAccept {
		return malformed("%s message from worker %s before its accept", m.Kind, r.addr)
	}
	if m.Version != ProtocolVersion || m.Window < 1 || m.Window > r.minWindow || m.MaxWindow < m.Window || !m.Comp.Valid() {
		// The worker may only clamp the window asked for, never raise
		// it, and speaks the version asked for or refuses it.
		return malformed("accept from %s: version %d (asked for %d), window %d (asked for %d), cap %d, %v", r.addr, m.Version, ProtocolVersion, m.Window, r.minWindow, m.MaxWindow, m.Comp)
	}
	r.workerMax, r.window, r.comp, r.version = m.MaxWindow, m.Window-int(r.withheld), m.Comp, m.Version
	r.minWindow = min(r.minWindow, m.Window)
	return nil
}

// readFailed is what Next returns when reading a message failed: a ctx
// that ended before any byte of it arrived leaves the stream usable;
// anything else breaks it, naming Close or ctx when they interrupted it.
func (r *Receiver) readFailed(ctx context.Context, err error) (Header, tensor.Element, error) {
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

// end takes in the worker's End, m, and returns what it says, which Next
// returns from now on: the end of data (io.EOF, or ErrPaused), the
// worker's failure, or its refusal of the protocol version.
func (r *Receiver) end(m *wireMsg) (Header, tensor.Element, error) {
	switch {
	case m.Version != 0 || m.MinVersion != 0:
		verr := refused(m, r.workerMax != 0)
		if errors.Is(verr, ErrMalformedBatch) {
			return r.fail(fmt.Errorf("next batch from %s: %w", r.addr, verr))
		}
		r.err = fmt.Errorf("open batch stream to %s: %w", r.addr, verr)
	case m.Failed:
		r.err = &RemoteError{Message: m.Error}
	case r.workerMax == 0:
		// A clean end with no Accept: a worker from before protocol
		// versions with nothing to send.
		return r.fail(fmt.Errorf("open batch stream to %s: %w", r.addr, &VersionError{Client: ProtocolVersion}))
	case m.Sent != r.received:
		return r.fail(malformed("end of stream from %s after %d batches, but %d were sent", r.addr, r.received, m.Sent))
	case m.Paused:
		r.err = ErrPaused
	default:
		r.err = io.EOF
	}
	r.s.Close()
	return Header{}, tensor.Element{}, r.err
}

// maxScratchBytes bounds the tail buffer a Receiver keeps for reuse;
// larger tails get a buffer of their own.
const maxScratchBytes = 1 << 20

// allocTail returns the buffer the current message's tail goes to: for a
// batch with unpadded tensors the reused scratch buffer (up to
// maxScratchBytes), otherwise one from cfg.Alloc or a new one.
func (r *Receiver) allocTail(n int) []byte {
	if r.cur != nil && n <= maxScratchBytes && hasUnpadded(r.cur) {
		r.tailUsed = true
		if cap(r.scratch) < n {
			r.scratch = make([]byte, n)
		}
		return r.scratch[:n]
	}
	if r.cfg.Alloc != nil {
		return r.cfg.Alloc(n)
	}
	return make([]byte, n)
}

// allocWire returns the buffer a compressed tail of n bytes is read into.
func (r *Receiver) allocWire(n int) []byte {
	if n > maxScratchBytes {
		return make([]byte, n)
	}
	if cap(r.wire) < n {
		r.wire = make([]byte, n)
	}
	return r.wire[:n]
}

func hasUnpadded(m *wireMsg) bool {
	for i := range m.Tensors {
		if m.Tensors[i].Lengths != "" {
			return true
		}
	}
	return false
}

// detachFromTail copies the tensors that still view the tail (all but the
// re-padded ones) into buffers of their own.
func detachFromTail(e *tensor.Element, m *wireMsg) {
	for i := range m.Tensors {
		if m.Tensors[i].Lengths != "" || i >= len(e.Tensors) {
			continue
		}
		t := &e.Tensors[i]
		if t.Data != nil {
			t.Data = bytes.Clone(t.Data)
		}
		if t.Offsets != nil {
			t.Offsets = slices.Clone(t.Offsets)
		}
	}
}

// plan decides the credit message to write before reading the next batch:
// the credits owed (all of them, or minus those withheld to shrink the
// window) and how much to grow the window, with credits for a large window
// sent in groups of a quarter of it rather than one per batch. Owned by the
// goroutine calling Next.
func (r *Receiver) plan() (credits, grow int64) {
	if r.workerMax == 0 {
		// The worker's window is not known yet (it may have clamped
		// ours): credit every batch, never grow.
		credits = r.owed
		return credits, 0
	}
	target := r.window
	if r.cfg.WindowBytes > 0 && r.received > 0 {
		t := r.cfg.WindowBytes / max(r.meanBytes, 1)
		hi := int64(max(min(r.cfg.MaxWindow, r.workerMax), r.minWindow))
		target = int(min(max(t, int64(r.minWindow)), hi))
	}
	switch {
	case target < r.window: // shrink: keep back credits owed
		keep := min(r.owed, int64(r.window-target))
		r.owed -= keep
		r.withheld += keep
		r.window -= int(keep)
	case target > r.window: // grow: give back withheld credits first
		back := min(r.withheld, int64(target-r.window))
		r.withheld -= back
		r.owed += back
		r.window += int(back)
		grow = int64(target - r.window)
	}
	if r.owed+grow < max(int64(r.window)/4, 1) {
		return 0, 0
	}
	return r.owed, grow
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

// Compression returns the compression the worker confirmed in its Accept
// (CompressNone until the first batch). Owned by the goroutine calling
// Next.
func (r *Receiver) Compression() Compression { return r.comp }

// Version returns the protocol version the worker confirmed in its Accept
// (0 until the first batch). Owned by the goroutine calling Next.
func (r *Receiver) Version() uint16 { return r.version }

// LastWireBytes returns the bytes the last batch Next returned took on the
// stream: its frame as sent (header included; unpadded, compressed). Owned
// by the goroutine calling Next.
func (r *Receiver) LastWireBytes() int64 { return r.lastWire }

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
