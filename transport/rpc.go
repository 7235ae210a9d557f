package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// RPCServer defaults.
const (
	// DefaultRPCReadTimeout bounds how long an RPCServer waits for a request
	// frame, and how long it writes a response when the caller sent no deadline.
	DefaultRPCReadTimeout = 10 * time.Second
	// DefaultMaxRPCRequestBytes bounds one request frame (header + body). The
	// server may hold MaxConcurrentRPCs of them in memory at once, so it is far
	// below MaxFrameBytes, which is sized for data batches.
	DefaultMaxRPCRequestBytes = 8 << 20
)

// rpcRequest is the header of a request frame; the CBOR-encoded request value is
// the frame's tail.
type rpcRequest struct {
	Method string `cbor:"1,keyasint"`
	// Timeout is the caller's remaining time in nanoseconds (0: none). Relative,
	// so clock skew between nodes does not matter.
	Timeout int64 `cbor:"2,keyasint,omitempty"`
	// Token is the caller's access token (WithToken), if any: the node
	// decides what it proves (TokenFromContext).
	Token string `cbor:"3,keyasint,omitempty"`
}

// rpcResponse is the header of a response frame; on success the CBOR-encoded
// response value is the tail.
type rpcResponse struct {
	Code    string `cbor:"1,keyasint,omitempty"`
	Message string `cbor:"2,keyasint,omitempty"`
}

// Handler serves one RPC method. It decodes its request with decode (hardened
// CBOR; decode errors carry ErrInvalid) and returns a CBOR-encodable response
// or an error. Errors wrapping an *Error keep its code; others become
// ErrInternal with the error's text. PeerFromContext(ctx) tells who called
// (under mutual TLS).
type Handler func(ctx context.Context, decode func(v any) error) (any, error)

// RPCServer serves request/response RPCs, one per KindControl stream.
type RPCServer struct {
	codec       *Codec // responses and request bodies
	reqCodec    *Codec // reads requests, bounded by the max request size
	log         *slog.Logger
	sem         chan struct{}
	readTimeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	handlers  map[string]Handler
	calls     map[string]*atomic.Uint64 // per registered method: requests served
	listeners map[net.Listener]struct{}
	closed    bool
}

// NewRPCServer returns a server decoding with codec (its MaxFrameBytes bounds a
// request) that serves at most maxConcurrent requests at once (Config.MaxConcurrentRPCs).
// log may be nil.
func NewRPCServer(codec *Codec, maxConcurrent int, log *slog.Logger) *RPCServer {
	if maxConcurrent <= 0 {
		maxConcurrent = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &RPCServer{
		codec:       codec,
		reqCodec:    codec.WithMaxFrame(DefaultMaxRPCRequestBytes),
		log:         log,
		sem:         make(chan struct{}, maxConcurrent),
		readTimeout: DefaultRPCReadTimeout,
		ctx:         ctx,
		cancel:      cancel,
		handlers:    make(map[string]Handler),
		calls:       make(map[string]*atomic.Uint64),
		listeners:   make(map[net.Listener]struct{}),
	}
}

// SetReadTimeout changes how long the server waits for a request frame (default
// DefaultRPCReadTimeout). Call it before Serve.
func (s *RPCServer) SetReadTimeout(d time.Duration) {
	if d > 0 {
		s.mu.Lock()
		s.readTimeout = d
		s.mu.Unlock()
	}
}

// Handle registers h for method, replacing any earlier handler.
func (s *RPCServer) Handle(method string, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[method] = h
	if s.calls[method] == nil {
		s.calls[method] = new(atomic.Uint64)
	}
}

// Calls returns how many requests each registered method has been sent
// since the server was made (answered or refused after the method was
// looked up: a request for an unknown method is not counted, so peers
// cannot grow the map).
func (s *RPCServer) Calls() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.calls))
	for m, c := range s.calls {
		out[m] = c.Load()
	}
	return out
}

// Serve accepts streams from l and serves one request on each, until l is
// closed or Close is called; it then returns nil, or the accept error if l
// failed otherwise. Close closes l.
func (s *RPCServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1) // Serve itself is waited for by Close
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		s.wg.Done()
	}()
	for {
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			return nil
		}
		conn, err := l.Accept()
		if err != nil {
			<-s.sem
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("rpc serve: accept: %w", err)
		}
		s.wg.Go(func() {
			defer func() { <-s.sem }()
			s.serveStream(conn)
		})
	}
}

// Close stops Serve (closing its listeners), cancels the contexts of in-flight
// requests and waits for their handlers to return.
func (s *RPCServer) Close() error {
	s.mu.Lock()
	s.closed = true
	ls := make([]net.Listener, 0, len(s.listeners))
	for l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	s.cancel()
	for _, l := range ls {
		_ = l.Close()
	}
	s.wg.Wait()
	return nil
}

func (s *RPCServer) serveStream(conn net.Conn) {
	defer conn.Close()
	s.mu.Lock()
	readTimeout, reqCodec := s.readTimeout, s.reqCodec
	s.mu.Unlock()
	var req rpcRequest
	body, release, err := readRequest(conn, reqCodec, readTimeout, &req)
	defer release()
	if err != nil {
		s.log.Debug("bad request", "remote", conn.RemoteAddr().String(), "err", err)
		code := ErrUnavailable // timeout or reset: the caller is likely gone
		if errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrFrameTooLarge) {
			code = ErrInvalid
		}
		_ = conn.SetWriteDeadline(time.Now().Add(readTimeout))
		s.writeResponse(conn, nil, Errorf(code, "read request: %v", err))
		return
	}

	ctx, cancel := withPeer(s.ctx, conn), context.CancelFunc(func() {}) // PeerFromContext
	if req.Token != "" {
		ctx = context.WithValue(ctx, receivedTokenKey{}, req.Token) // TokenFromContext
	}
	writeDeadline := time.Now().Add(readTimeout)
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout))
		writeDeadline = time.Now().Add(time.Duration(req.Timeout))
	}
	defer cancel()

	s.mu.Lock()
	h := s.handlers[req.Method]
	if c := s.calls[req.Method]; c != nil {
		c.Add(1)
	}
	s.mu.Unlock()
	var resp any
	if h == nil {
		err = Errorf(ErrUnknownMethod, "%q", req.Method)
	} else {
		resp, err = s.call(ctx, h, req.Method, body)
	}
	if err == nil && ctx.Err() != nil {
		err = Errorf(ErrDeadline, "%s: %v", req.Method, ctx.Err())
	}
	// The answer gets at most readTimeout to be written, whatever
	// timeout the caller asked for: a caller that does not read must not
	// hold a request slot (and the answer's buffer) for as long as it says.
	if latest := time.Now().Add(readTimeout); writeDeadline.After(latest) {
		writeDeadline = latest
	}
	_ = conn.SetWriteDeadline(writeDeadline)
	s.writeResponse(conn, resp, err)
	if w, ok := resp.(Written); ok {
		w.Written()
	}
}

// Written is implemented by a handler's answer that holds something until
// it has been written (or its write has failed): the server calls it then.
type Written interface{ Written() }

// readRequest reads one request frame from conn within readTimeout. On a
// stream the transport accepted, the request must also make progress every
// RPCIdleTimeout, and its body is read as its bytes arrive, with every byte
// past the first rpcFreeBytes taken from the connection's and the node's byte
// budgets (MaxRPCBytesPerConn, MaxRPCBytesInFlight) before it is read; release
// gives them back, after the request has been handled.
func readRequest(conn net.Conn, codec *Codec, readTimeout time.Duration, req *rpcRequest) (body []byte, release func(), err error) {
	r := &idleReader{c: conn, final: time.Now().Add(readTimeout)}
	var budgets []*ByteBudget
	if st, ok := conn.(*Stream); ok {
		r.idle = st.t.cfg.RPCIdleTimeout
		if st.in != nil {
			budgets = []*ByteBudget{st.in.budget, st.t.rpcBudget}
		}
	}
	var held int64
	release = func() {
		for _, b := range budgets {
			b.Release(held)
		}
		held = 0
	}
	reserve := func(n int) error {
		if len(budgets) == 0 {
			return nil
		}
		ctx, cancel := context.WithDeadline(context.Background(), r.deadline())
		defer cancel()
		for i, b := range budgets {
			if err := b.Acquire(ctx, int64(n)); err != nil {
				for _, taken := range budgets[:i] {
					taken.Release(int64(n))
				}
				return err
			}
		}
		held += int64(n)
		return nil
	}
	body, err = codec.ReadFrameGrow(r, req, rpcFreeBytes, reserve)
	_ = conn.SetReadDeadline(time.Time{})
	return body, release, err
}

// call runs a handler, turning a panic into ErrInternal: a bug in one handler
// must not take the node down.
func (s *RPCServer) call(ctx context.Context, h Handler, method string, body []byte) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("rpc handler panicked", "method", method, "panic", r)
			resp, err = nil, Errorf(ErrInternal, "%s: handler panicked", method)
		}
	}()
	decode := func(v any) error {
		if err := s.codec.Unmarshal(body, v); err != nil {
			return Errorf(ErrInvalid, "decode %s request: %v", method, err)
		}
		return nil
	}
	return h(ctx, decode)
}

func (s *RPCServer) writeResponse(conn net.Conn, resp any, err error) {
	var werr error
	if err != nil {
		e := toWire(err)
		werr = s.codec.WriteFrame(conn, rpcResponse{Code: e.Code, Message: e.Message})
	} else {
		body, merr := s.codec.Marshal(resp)
		if merr != nil {
			e := Errorf(ErrInternal, "encode response: %v", merr)
			werr = s.codec.WriteFrame(conn, rpcResponse{Code: e.Code, Message: e.Message})
		} else if werr = s.codec.WriteFrame(conn, rpcResponse{}, body); errors.Is(werr, ErrFrameTooLarge) {
			e := Errorf(ErrInternal, "response too large: %v", werr)
			werr = s.codec.WriteFrame(conn, rpcResponse{Code: e.Code, Message: e.Message})
		}
	}
	if werr != nil {
		s.log.Debug("write response", "remote", conn.RemoteAddr().String(), "err", werr)
	}
}

// Call opens a KindControl stream to addr, sends method and req, and decodes the
// response into resp (nil to discard it). It honours ctx's deadline, which the
// server also sees. Server errors come back as *Error (errors.Is works with the
// sentinels); failures to reach the server wrap ErrUnavailable, an expired ctx
// wraps ErrDeadline and the context error.
//
// When the request fails because the cached connection turned out stale (the
// peer restarted and answered with a stateless reset), the request never reached
// a live handler, so Call redials and sends it once more.
func Call(ctx context.Context, t *Transport, codec *Codec, addr, method string, req, resp any) error {
	body, err := codec.Marshal(req)
	if err != nil {
		return fmt.Errorf("call %s: %w: %w", method, ErrInvalid, err)
	}
	for attempt := 0; ; attempt++ {
		err := call(ctx, t, codec, addr, method, body, resp)
		if err == nil || attempt > 0 || !isStatelessReset(err) || ctx.Err() != nil {
			return err
		}
		t.log.Debug(msgStaleRetry, "peer", addr, "method", method)
	}
}

const msgStaleRetry = "stale connection reset by restarted peer, retrying"

func call(ctx context.Context, t *Transport, codec *Codec, addr, method string, body []byte, resp any) error {
	s, err := t.Dial(ctx, addr, KindControl)
	if err != nil {
		return callErr(ctx, method, addr, err)
	}
	defer s.Close()
	var timeout int64
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
		timeout = int64(time.Until(dl))
		if timeout <= 0 {
			return callErr(ctx, method, addr, context.DeadlineExceeded)
		}
	}
	// Cancellation without a deadline: unblock the stream when ctx ends.
	stop := context.AfterFunc(ctx, func() { _ = s.SetDeadline(time.Now()) })
	defer stop()

	token, _ := ctx.Value(sendTokenKey{}).(string)
	if err := codec.WriteFrame(s, rpcRequest{Method: method, Timeout: timeout, Token: token}, body); err != nil {
		if errors.Is(err, ErrFrameTooLarge) {
			return fmt.Errorf("call %s on %s: %w: %w", method, addr, ErrInvalid, err)
		}
		return callErr(ctx, method, addr, err)
	}
	_ = s.CloseWrite()
	var rh rpcResponse
	rbody, err := codec.ReadFrame(s, &rh)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return callErr(ctx, method, addr, err)
	}
	if rh.Code != "" {
		return &Error{Code: rh.Code, Message: rh.Message}
	}
	if resp != nil {
		if err := codec.Unmarshal(rbody, resp); err != nil {
			return fmt.Errorf("call %s on %s: decode response: %w: %w", method, addr, ErrInternal, err)
		}
	}
	return nil
}

func callErr(ctx context.Context, method, addr string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return fmt.Errorf("call %s on %s: %w: %w", method, addr, ErrDeadline, ctxErr)
		}
		return fmt.Errorf("call %s on %s: %w", method, addr, ctxErr)
	}
	// The stream deadline is ctx's, and may fire just before ctx's own timer.
	// Other timeouts (idle, handshake) mean the peer is unreachable.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return fmt.Errorf("call %s on %s: %w: %w (%w)", method, addr, ErrDeadline, context.DeadlineExceeded, err)
	}
	return fmt.Errorf("call %s on %s: %w: %w", method, addr, ErrUnavailable, err)
}

// isStatelessReset reports whether err comes from a connection that the peer
// reset statelessly, i.e. a peer that restarted and does not know it.
func isStatelessReset(err error) bool {
	var sr *quic.StatelessResetError
	return errors.As(err, &sr)
}

// Access tokens travel in a request's header: a client puts its token in
// the context of its calls (WithToken), a handler finds the caller's in
// its own (TokenFromContext). The two keys differ, so that a node's calls
// made while it serves a request never pass its caller's token on.
type (
	sendTokenKey     struct{}
	receivedTokenKey struct{}
)

// WithToken is ctx whose calls (Call) carry token.
func WithToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, sendTokenKey{}, token)
}

// TokenFromContext is the access token the caller of the request an RPC
// handler serves sent, if any. This package proves nothing of it: the
// layers above check it.
func TokenFromContext(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(receivedTokenKey{}).(string)
	return t, ok && t != ""
}
