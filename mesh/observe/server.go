package observe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
)

// Server serves NewHandler over HTTP until Close.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	o    Options
	h    atomic.Pointer[http.Handler] // the node's handler, once Attach has run
	done chan struct{}                // closed when Serve has returned
}

// Listen serves n's metrics, snapshot, page and health endpoints on addr
// (host:port; port 0 picks one: see Addr). Requests are bounded: headers
// within 10 s and 16 KiB, a response within 30 s.
func Listen(addr string, n *mesh.Node, o Options) (*Server, error) {
	s, err := ListenStarting(addr, o)
	if err != nil {
		return nil, err
	}
	s.Attach(n)
	return s, nil
}

// ListenStarting listens on addr before the node exists, so that a
// process that is still starting (joining, opening its Raft log) answers
// its liveness probe: until Attach, /livez answers 200, /readyz 503
// ("starting") and every other path 503.
func ListenStarting(addr string, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, o: o, done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// Attach makes the server answer for n (once; later calls are ignored).
func (s *Server) Attach(n *mesh.Node) {
	h := NewHandler(n, s.o)
	s.h.CompareAndSwap(nil, &h)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case "/livez":
		writeLive(w)
	case "/readyz":
		writeReadiness(w, r, mesh.Readiness{Checks: []mesh.HealthCheck{{Name: "started", Detail: "the node is starting"}}})
	default:
		http.Error(w, "the node is starting", http.StatusServiceUnavailable)
	}
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, giving requests in flight up to 2 s, and waits
// for its goroutine.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	return err
}
