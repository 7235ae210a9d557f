// Package dnstest is a tiny authoritative DNS server for tests: it answers
// A and AAAA queries for the names it is given, over UDP and TCP, and
// NXDOMAIN for every other name, the way a Kubernetes headless Service's
// name resolves to the addresses of its pods as they come and go. Tests
// change the answers while nodes run (Set) and count the queries
// (Queries), to show that a node resolves a name again while it retries.
//
// It uses golang.org/x/net/dns/dnsmessage, which the module already
// requires, and nothing else.
package dnstest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is a running DNS server.
type Server struct {
	udp net.PacketConn
	tcp net.Listener

	mu      sync.Mutex
	records map[string][]net.IP // by lower-case name without the final dot
	queries map[string]int

	wg sync.WaitGroup
}

// Start serves on addr ("127.0.0.1:0" for any port; a namespace's bridge
// address and port 53 for processes that read /etc/resolv.conf), UDP and
// TCP on the same port.
//
// With port 0 the UDP port is the kernel's choice, and its TCP twin may be
// another process's already (seen under CI: "bind: address already in
// use"): Start then tries other ports, up to 20 times.
func Start(addr string) (*Server, error) {
	udp, tcp, err := listenPair(addr)
	if err != nil {
		return nil, err
	}
	s := &Server{udp: udp, tcp: tcp, records: map[string][]net.IP{}, queries: map[string]int{}}
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	return s, nil
}

// listenPair listens on UDP and TCP at one port of addr.
func listenPair(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 0; ; i++ {
		udp, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		tcp, err := net.Listen("tcp", udp.LocalAddr().String())
		if err == nil {
			return udp, tcp, nil
		}
		udp.Close()
		if i+1 >= tries {
			return nil, nil, err
		}
	}
}

// Addr is the server's address (UDP and TCP).
func (s *Server) Addr() string { return s.udp.LocalAddr().String() }

// Set makes name resolve to ips (none: NXDOMAIN).
func (s *Server) Set(name string, ips ...net.IP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[canon(name)] = append([]net.IP(nil), ips...)
}

// Add appends ip to name's addresses.
func (s *Server) Add(name string, ip net.IP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[canon(name)] = append(s.records[canon(name)], ip)
}

// Queries is how many questions for name the server has answered.
func (s *Server) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[canon(name)]
}

// Resolver is a Go resolver that asks only this server.
func (s *Server) Resolver() *net.Resolver {
	addr := s.Addr()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// Close stops the server.
func (s *Server) Close() error {
	err := errors.Join(s.udp.Close(), s.tcp.Close())
	s.wg.Wait()
	return err
}

func canon(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, ok := s.answer(buf[:n], 512); ok {
			s.udp.WriteTo(out, from)
		}
	}
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			for {
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				msg := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, msg); err != nil {
					return
				}
				out, ok := s.answer(msg, 65535)
				if !ok {
					return
				}
				binary.BigEndian.PutUint16(l[:], uint16(len(out)))
				if _, err := c.Write(append(l[:], out...)); err != nil {
					return
				}
			}
		}()
	}
}

// answer builds the reply to one query; ok is false for what is not a
// query at all.
func (s *Server) answer(query []byte, max int) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := canon(q.Name.String())
	s.mu.Lock()
	ips, known := s.records[name]
	ips = append([]net.IP(nil), ips...)
	s.queries[name]++
	s.mu.Unlock()

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeSuccess}
	if !known || len(ips) == 0 {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, false
	}
	if err := b.Question(q); err != nil {
		return nil, false
	}
	if err := b.StartAnswers(); err != nil {
		return nil, false
	}
	rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	for _, ip := range ips {
		switch v4 := ip.To4(); {
		case q.Type == dnsmessage.TypeA && v4 != nil:
			rrh.Type = dnsmessage.TypeA
			var a dnsmessage.AResource
			copy(a.A[:], v4)
			if err := b.AResource(rrh, a); err != nil {
				return nil, false
			}
		case q.Type == dnsmessage.TypeAAAA && v4 == nil && ip.To16() != nil:
			rrh.Type = dnsmessage.TypeAAAA
			var a dnsmessage.AAAAResource
			copy(a.AAAA[:], ip.To16())
			if err := b.AAAAResource(rrh, a); err != nil {
				return nil, false
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil, false
	}
	if len(out) > max { // truncated: the client asks again over TCP
		rh.Truncated = true
		b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
		b.StartQuestions()
		b.Question(q)
		out, _ = b.Finish()
	}
	return out, true
}
