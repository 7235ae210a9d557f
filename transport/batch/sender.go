package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/transport"
	"github.com/quic-go/quic-go"
)

// Timeouts of the worker side.
const (
	// DefaultOpenTimeout bounds how long Accept waits for the OpenRequest when
	// its context has no deadline.
	DefaultOpenTimeout = 10 * time.Second
	// DefaultEndTimeout bounds how long End waits to write the End message
	// (it blocks only while the client's flow-control window is full).
	DefaultEndTimeout = 30 * time.Second
	// MaxErrorBytes bounds the error text End sends; longer texts are cut.
	MaxErrorBytes = 4 << 10
)

// controlFrameBytes bounds the frames of control messages (open, credit,
// end): they have no tail and small headers.
const controlFrameBytes = 16 << 10

// Sender errors; returned errors wrap them.
var (
	// ErrClientGone reports that the client closed or reset the stream, or
	// its connection died: nothing more can be sent.
	ErrClientGone = errors.New("client gone")
	// ErrSenderClosed reports a Send or End after Close, or interrupted by it.
	ErrSenderClosed = errors.New("sender closed")
	// ErrEnded reports a Send or End after End.
	ErrEnded = errors.New("stream already ended")
)

// Sender is the worker side of one batch stream. It owns the stream it was
// accepted on. Send and End are meant for one producer goroutine (they are
// serialised); Close and Outstanding may be called from any goroutine.
type Sender struct {
	conn      net.Conn
	ctl       *transport.Codec
	maxWindow int
	version   uint16      // the protocol version in force (the client's Open's)
	comp      Compression // asked for by the client: what SendAll compresses with
	zfs       []*Frame    // SendAll's compressed frames; guarded by wmu

	wmu sync.Mutex // serialises writes (Send, End)

	mu       sync.Mutex
	window   int    // credit window in force: the client's, grown by it, at most maxWindow
	sent     uint64 // batches sent (or being sent)
	credited uint64 // credits returned by the client
	ended    bool
	broken   error // a write failed: the stream is unusable
	goneErr  error // why the credit reader stopped

	credit    chan struct{} // capacity 1: poked when credit arrives
	gone      chan struct{} // closed when the credit reader stops
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Accept reads the OpenRequest from a freshly accepted KindData stream s
// (waiting until ctx's deadline, or DefaultOpenTimeout without one), clamps
// its Window to maxWindow, answers with an Accept (the protocol version,
// window and compression in force, and the window's cap), and starts the
// goroutine that reads credits. The Sender owns s from then on. On error s
// is closed; when the request was readable but refused, the client first
// receives an End with the reason: an Open of a protocol version this
// package does not speak (the error is a *VersionError, and the End names
// the versions spoken), or a Window below 1.
func Accept(ctx context.Context, codec *transport.Codec, s net.Conn, maxWindow int) (*Sender, OpenRequest, error) {
	return AcceptWith(ctx, codec, s, maxWindow, nil)
}

// AcceptWith is Accept with the compression decided by choose (nil: as the
// client asked). choose gets the client's request once it is read (its
// Compression already CompressNone when this package does not know the
// one asked for) and before the client is told the compression in force;
// it may return the Compression asked for or CompressNone, and anything
// else counts as CompressNone. A worker lets the job's options decide, so
// a client cannot make it compress what the job does not. choose runs
// under ctx, not under the default timeout for reading the request.
func AcceptWith(ctx context.Context, codec *transport.Codec, s net.Conn, maxWindow int, choose func(OpenRequest) Compression) (*Sender, OpenRequest, error) {
	if maxWindow < 1 {
		s.Close()
		return nil, OpenRequest{}, fmt.Errorf("accept batch stream: maxWindow is %d, must be at least 1", maxWindow)
	}
	ctl := codec.WithMaxFrame(controlFrameBytes)
	octx := ctx // reading the request, and later writing the Accept
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, DefaultOpenTimeout)
		defer cancel()
	}
	var m wireMsg
	stop := interruptOn(octx, s.SetReadDeadline)
	_, err := readMsg(ctl, s, &m, Limits{}, bufs{})
	stop()
	if err == nil && m.Kind != kindOpen {
		err = malformed("first message is %s, want open", m.Kind)
	}
	if err != nil {
		s.Close()
		if octx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, octx.Err())
		}
		return nil, OpenRequest{}, fmt.Errorf("accept batch stream from %s: %w", s.RemoteAddr(), err)
	}
	if !speaks(m.Version) {
		// The rest of the Open may mean something else in its version:
		// refuse before reading it.
		end, verr := refusal(m.Version)
		refuse(ctl, s, &end)
		return nil, OpenRequest{}, fmt.Errorf("accept batch stream from %s: %w", s.RemoteAddr(), verr)
	}
	req := OpenRequest{Job: m.Job, Consumer: m.Consumer, Window: m.Window, Extra: m.OpenExtra, Compression: m.Comp, JobID: m.JobID, Token: m.Token, Capability: m.Capability}
	if !req.Compression.Valid() {
		// A compression this node does not know: send uncompressed,
		// which the Accept tells the client.
		req.Compression = CompressNone
	}
	if req.Window < 1 {
		err := fmt.Errorf("open request for job %q: window is %d, must be at least 1", req.Job, req.Window)
		refuse(ctl, s, &wireMsg{Kind: kindEnd, Failed: true, Error: err.Error()})
		return nil, req, fmt.Errorf("accept batch stream from %s: %w", s.RemoteAddr(), err)
	}
	comp := req.Compression
	if choose != nil {
		if c := choose(req); c != comp {
			comp = CompressNone
		}
	}
	snd := &Sender{
		conn:      s,
		ctl:       ctl,
		window:    min(req.Window, maxWindow),
		maxWindow: maxWindow,
		version:   m.Version,
		comp:      comp,
		credit:    make(chan struct{}, 1),
		gone:      make(chan struct{}),
		closing:   make(chan struct{}),
	}
	// Tell the client the version, window and compression in force and the
	// window's cap, so it can size its credits.
	if choose != nil && octx != ctx {
		// choose may have taken a while: the default timeout counts
		// afresh for the write.
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, DefaultOpenTimeout)
		defer cancel()
	}
	stop = interruptOn(octx, s.SetWriteDeadline)
	err = ctl.WriteFrame(s, &wireMsg{Kind: kindAccept, Version: snd.version, Window: snd.window, MaxWindow: maxWindow, Comp: snd.comp})
	stop()
	if err != nil {
		resetStream(s)
		return nil, req, fmt.Errorf("accept batch stream from %s: %w", s.RemoteAddr(), err)
	}
	snd.wg.Go(snd.readCredits)
	return snd, req, nil
}

// refuse writes end, an End telling the client why its Open is refused
// (waiting at most a second: the client may be gone), and closes s.
func refuse(ctl *transport.Codec, s net.Conn, end *wireMsg) {
	_ = s.SetWriteDeadline(time.Now().Add(time.Second))
	_ = ctl.WriteFrame(s, end)
	s.Close()
}

// Version returns the protocol version in force on the stream: the one
// the client's Open asked for.
func (s *Sender) Version() uint16 { return s.version }

// Compression returns the compression in force on the stream (what the
// Accept told the client): frames are sent compressed with it, where that
// saves enough.
func (s *Sender) Compression() Compression { return s.comp }

// Window returns the credit window in force (the client's, clamped, as
// the client has grown it).
func (s *Sender) Window() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.window
}

// readCredits reads Credit messages until the client goes away or breaks the
// protocol, which it reports through gone.
func (s *Sender) readCredits() {
	var err error
	for {
		var m wireMsg
		if _, err = readMsg(s.ctl, s.conn, &m, Limits{}, bufs{}); err != nil {
			break
		}
		if m.Kind != kindCredit || m.Credits < 0 || m.Grow < 0 || m.Grow > int64(s.maxWindow) || (m.Credits == 0 && m.Grow == 0) {
			err = malformed("client sent %s message with %d credits and %d window growth, want credit or growth ≥ 1 (growth ≤ %d)", m.Kind, m.Credits, m.Grow, s.maxWindow)
			break
		}
		s.mu.Lock()
		out := s.sent - s.credited
		if uint64(m.Credits) > out {
			s.mu.Unlock()
			err = malformed("client returned %d credits with %d batches outstanding", m.Credits, out)
			break
		}
		s.credited += uint64(m.Credits)
		s.window = min(s.window+int(m.Grow), s.maxWindow) // both ≤ maxWindow: no overflow
		s.mu.Unlock()
		select {
		case s.credit <- struct{}{}:
		default:
		}
	}
	if err == io.EOF {
		err = errors.New("client closed the stream")
	}
	s.mu.Lock()
	s.goneErr = fmt.Errorf("%w: %w", ErrClientGone, err)
	s.mu.Unlock()
	close(s.gone)
	if errors.Is(err, ErrMalformedBatch) {
		resetStream(s.conn) // a client that breaks the protocol gets the stream reset
	}
}

// Send writes f once the client has credit for it: it blocks while Window
// batches are outstanding. It fails fast when the client is gone (closed or
// reset the stream, connection lost), when ctx ends, or after Close. A ctx
// ending while the frame is half written breaks the stream (later calls fail).
func (s *Sender) Send(ctx context.Context, f *Frame) error {
	if f == nil {
		return errors.New("send batch: nil frame")
	}
	_, err := s.SendAll(ctx, []*Frame{f})
	return err
}

// SendAll sends fs in order, as Send each, but writes as many as the
// client's credit allows at once in one coalesced write: small batches then
// cost quic-go one stream write (and one wait for its packer) per 64 KiB
// instead of one per batch. It returns how many frames were sent; on error
// the rest were not (a frame half written breaks the stream, as in Send).
func (s *Sender) SendAll(ctx context.Context, fs []*Frame) (int, error) {
	for _, f := range fs {
		if f == nil {
			return 0, errors.New("send batch: nil frame")
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.comp != CompressNone {
		defer clear(s.zfs) // keep no frame alive after the call
		s.zfs = s.zfs[:0]
		for _, f := range fs {
			z, err := f.Compressed(s.comp)
			if err != nil {
				return 0, fmt.Errorf("send batch: %w", err)
			}
			s.zfs = append(s.zfs, z)
		}
		fs = s.zfs
	}
	sent := 0
	for sent < len(fs) {
		k, err := s.reserve(ctx, len(fs)-sent)
		if err != nil {
			return sent, err
		}
		stop := interruptOn(ctx, s.conn.SetWriteDeadline)
		err = writeFrames(s.conn, fs[sent:sent+k])
		stop()
		if err != nil {
			return sent, s.fail(ctx, "send batch", err)
		}
		sent += k
	}
	return sent, nil
}

// Available returns the credits free now: how many batches Send could write
// without waiting. A producer holding several batches may pass that many to
// SendAll.
func (s *Sender) Available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.window - int(s.sent-s.credited)
}

// reserve waits for at least one credit and takes up to want of them,
// returning how many it took.
func (s *Sender) reserve(ctx context.Context, want int) (int, error) {
	for {
		s.mu.Lock()
		err := s.usable()
		if out := s.sent - s.credited; err == nil && out < uint64(s.window) {
			k := int(min(uint64(s.window)-out, uint64(want)))
			s.sent += uint64(k)
			s.mu.Unlock()
			return k, nil
		}
		s.mu.Unlock()
		if err != nil {
			return 0, fmt.Errorf("send batch: %w", err)
		}
		select {
		case <-s.credit:
		case <-s.gone:
		case <-s.closing:
		case <-ctx.Done():
			return 0, fmt.Errorf("send batch: waiting for credit: %w", ctx.Err())
		}
	}
}

// usable reports why nothing can be sent any more, or nil. Called with mu held.
func (s *Sender) usable() error {
	select {
	case <-s.closing:
		return ErrSenderClosed
	default:
	}
	switch {
	case s.ended:
		return ErrEnded
	case s.broken != nil:
		return s.broken
	}
	select {
	case <-s.gone:
		return s.goneErr
	default:
	}
	return nil
}

// fail records a write failure: the stream is now unusable and is reset.
func (s *Sender) fail(ctx context.Context, op string, err error) error {
	s.mu.Lock()
	select {
	case <-s.closing:
		err = fmt.Errorf("%w: %w", ErrSenderClosed, err)
	default:
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		} else if s.goneErr != nil {
			err = fmt.Errorf("%w: %w", s.goneErr, err)
		}
	}
	err = fmt.Errorf("%s: %w", op, err)
	if s.broken == nil {
		s.broken = err
	}
	s.mu.Unlock()
	resetStream(s.conn) // a half-written frame must not look like a frame
	return err
}

// codeBatchAbort is the QUIC stream error code of a batch stream reset.
const codeBatchAbort quic.StreamErrorCode = 0x62

// resetStream aborts both directions of conn: unlike Close, the peer sees
// an error rather than a clean end after whatever was written.
func resetStream(conn net.Conn) {
	if ts, ok := conn.(*transport.Stream); ok {
		ts.Quic().CancelWrite(codeBatchAbort)
		ts.Quic().CancelRead(codeBatchAbort)
	}
	conn.Close()
}

// End ends the stream: with err nil the client reads io.EOF after the batches
// sent so far, otherwise a *RemoteError carrying err's text (cut to
// MaxErrorBytes). It does not wait for credit, but may wait up to
// DefaultEndTimeout while the client's flow-control window is full. Close the
// Sender afterwards.
func (s *Sender) End(err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultEndTimeout)
	defer cancel()
	return s.EndContext(ctx, err)
}

// EndPaused ends the stream cleanly, as End(nil), saying that the worker's
// process drained: the client reads ErrPaused (which is io.EOF too) after
// the batches sent so far.
func (s *Sender) EndPaused() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultEndTimeout)
	defer cancel()
	return s.end(ctx, nil, true)
}

// EndContext is End bounded by ctx instead of DefaultEndTimeout.
func (s *Sender) EndContext(ctx context.Context, err error) error { return s.end(ctx, err, false) }

func (s *Sender) end(ctx context.Context, err error, paused bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return fmt.Errorf("end stream: %w", ErrEnded)
	}
	s.ended = true
	if s.broken != nil {
		s.mu.Unlock()
		return fmt.Errorf("end stream: %w", s.broken)
	}
	m := wireMsg{Kind: kindEnd, Sent: s.sent}
	s.mu.Unlock()
	if err != nil {
		m.Failed, m.Error = true, errorText(err)
	} else {
		m.Paused = paused
	}
	stop := interruptOn(ctx, s.conn.SetWriteDeadline)
	werr := s.ctl.WriteFrame(s.conn, &m)
	stop()
	if werr != nil {
		return s.fail(ctx, "end stream", werr)
	}
	if cw, ok := s.conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // FIN after End; Close does the rest
	}
	return nil
}

// errorText is err's message as valid UTF-8 of at most MaxErrorBytes.
func errorText(err error) string {
	msg := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if msg == "" {
		msg = "unknown error"
	}
	if len(msg) > MaxErrorBytes {
		cut := MaxErrorBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return msg
}

// Close closes the stream (a stream closed without End reads as an error at
// the client), unblocks a Send or End in progress, and waits for the credit
// reader. It is idempotent.
func (s *Sender) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.conn.Close()
		s.wg.Wait()
	})
	return nil
}

// Gone is closed once the client has gone away (closed or reset the
// stream, or the connection was lost) or broke the protocol: a worker
// waiting for its next batch learns it without writing.
func (s *Sender) Gone() <-chan struct{} { return s.gone }

// Outstanding returns the batches sent and not yet credited back: at most the
// window.
func (s *Sender) Outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.sent - s.credited)
}

// interruptOn makes set(an expired deadline) interrupt a blocked stream
// operation when ctx ends. The returned stop undoes it: after stop returns,
// the deadline is clear.
func interruptOn(ctx context.Context, set func(time.Time) error) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = set(time.Unix(1, 0))
	})
	return func() {
		if !stopAfter() {
			<-fired
			_ = set(time.Time{})
		}
	}
}
