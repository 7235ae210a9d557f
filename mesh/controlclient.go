package mesh

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/feedmesh/feedmesh/transport"
)

// ControlClient talks to any node's control API: what the CLI's members,
// status and kv commands use.
type ControlClient struct {
	addr  string
	pc    net.PacketConn
	tr    *transport.Transport
	codec *transport.Codec
}

// DialControl prepares a client for the node at addr (its QUIC address).
// tlsConf comes from transport.ClientTLS. Nothing is sent until a call.
func DialControl(addr string, tlsConf *tls.Config, cfg transport.Config) (*ControlClient, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("node address %q: want host:port (the node's --port): %w", addr, err)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		return nil, err
	}
	tr, err := transport.New(pc, nil, tlsConf, cfg, discardLogger())
	if err != nil {
		pc.Close()
		return nil, err
	}
	codec, err := transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, err
	}
	return &ControlClient{addr: addr, pc: pc, tr: tr, codec: codec}, nil
}

func (c *ControlClient) call(ctx context.Context, method string, req, resp any) error {
	if err := transport.Call(ctx, c.tr, c.codec, c.addr, method, req, resp); err != nil {
		return fmt.Errorf("%s at %s: %w", method, c.addr, err)
	}
	return nil
}

// Members lists the members as the dialed node sees them.
func (c *ControlClient) Members(ctx context.Context) ([]Member, error) {
	var ms []Member
	return ms, c.call(ctx, MethodMembers, struct{}{}, &ms)
}

// Status returns the dialed node's view of the Raft group.
func (c *ControlClient) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.call(ctx, MethodStatus, struct{}{}, &s)
}

// Put writes key=value through the cluster's leader.
func (c *ControlClient) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	var r PutResponse
	return r.Index, c.call(ctx, MethodPut, PutRequest{Key: key, Value: value}, &r)
}

// Get reads key (linearizable unless stale).
func (c *ControlClient) Get(ctx context.Context, key string, stale bool) ([]byte, bool, error) {
	var r GetResponse
	err := c.call(ctx, MethodGet, GetRequest{Key: key, Stale: stale}, &r)
	return r.Value, r.Found, err
}

// Close releases the client's socket.
func (c *ControlClient) Close() error {
	err := c.tr.Close()
	c.pc.Close()
	return err
}

// Jobs lists the cluster's jobs.
func (c *ControlClient) Jobs(ctx context.Context) ([]JobInfo, error) {
	var out []JobInfo
	return out, c.call(ctx, MethodJobs, JobRequest{}, &out)
}
