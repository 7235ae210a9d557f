package observe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
)

// Server serves NewHandler over HTTP until Close.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve has returned
}

// Listen serves n's metrics, snapshot and page on addr (host:port; port 0
// picks one: see Addr). Requests are bounded: headers within 10 s and
// 16 KiB, a response within 30 s.
func Listen(addr string, n *mesh.Node, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		srv: &http.Server{
			Handler:           NewHandler(n, o),
			ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
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
