package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/autocache"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
)

// The mesh-wide cache: a worker that misses a split in its own store asks
// its peers which splits of the prefix they hold (api.MethodCacheHeld,
// remembered for Autocache.HeldTTL) and fetches the split from one that
// holds it over a cache stream (transport.KindCache). The fetched file is
// checked record by record like a local one and is not kept: the node
// that computed the split holds it. When no live peer has it (its holder
// died, or evicted it), the split is computed again.

// peerViews remembers which splits of a prefix each peer held when last
// asked.
type peerViews struct {
	mu    sync.Mutex
	views map[[2]string]peerView // (peer, prefix)
}

type peerView struct {
	at     time.Time
	splits ranges.Set
}

// maxPeerViews bounds the views remembered (peers × prefixes).
const maxPeerViews = 4096

// cacheHeld answers MethodCacheHeld from this node's store.
func (n *Node) cacheHeld(_ context.Context, req api.CacheHeldRequest) (api.CacheHeldResponse, error) {
	var resp api.CacheHeldResponse
	if n.cache != nil && n.cache.store != nil {
		for _, s := range n.cache.store.Splits(req.Prefix) {
			resp.Splits.Add(s)
		}
	}
	return resp, nil
}

// serveCache accepts cache streams until l closes (the transport closes
// it before the node waits for the cache's goroutines).
func (n *Node) serveCache(l net.Listener) {
	defer n.cache.wg.Done()
	busy := make(chan struct{}, n.cfg.Autocache.MaxServing)
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		n.cache.wg.Add(1)
		go n.handleCacheStream(conn, busy)
	}
}

func (n *Node) handleCacheStream(conn net.Conn, busy chan struct{}) {
	defer n.cache.wg.Done()
	defer conn.Close()
	if id, ok := transport.PeerIdentity(conn); ok && !id.IsNode() {
		// Cached splits are worker to worker: a client reads a job's
		// batches through its data streams, which check the job.
		n.log.Warn("cache stream refused: the peer is not a node", "peer", id.String())
		return
	}
	conn.SetDeadline(time.Now().Add(n.cfg.Autocache.FetchTimeout))
	var req api.CacheFetchRequest
	if _, err := n.codec.ReadFrame(conn, &req); err != nil {
		n.log.Debug("autocache: bad fetch request", "err", err)
		return
	}
	var resp api.CacheFetchResponse
	switch {
	case req.Version != api.CacheFetchVersion:
		resp.Error = fmt.Sprintf("cache stream version %d, this node speaks %d", req.Version, api.CacheFetchVersion)
	case n.cache == nil || n.cache.store == nil:
		resp.Error = "caching is off on this node"
	}
	if resp.Error != "" {
		n.codec.WriteFrame(conn, resp)
		return
	}
	select {
	case busy <- struct{}{}:
		defer func() { <-busy }()
	default:
		resp.Error = "busy: Autocache.MaxServing fetches in progress"
		n.codec.WriteFrame(conn, resp)
		return
	}
	f, size, ok := n.cache.store.OpenRaw(autocache.Key{Prefix: req.Prefix, Split: req.Split})
	if !ok {
		n.codec.WriteFrame(conn, resp)
		return
	}
	defer f.Close()
	resp.Found, resp.Size = true, size
	if err := n.codec.WriteFrame(conn, resp); err != nil {
		return
	}
	if _, err := io.CopyN(conn, f, size); err != nil {
		n.log.Debug("autocache: sending a cached split failed", "prefix", req.Prefix, "split", req.Split, "err", err)
	}
}

// errNotHeld: the peer asked does not hold the split (any more).
var errNotHeld = errors.New("autocache: peer does not hold the split")

// fetch reads split k from the peer at addr.
func (c *nodeCache) fetch(ctx context.Context, addr string, k autocache.Key) (*autocache.FileReader, error) {
	ctx, cancel := context.WithTimeout(ctx, c.n.cfg.Autocache.FetchTimeout)
	defer cancel()
	s, err := c.n.tr.Dial(ctx, addr, transport.KindCache)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		s.SetDeadline(d)
	}
	if err := c.n.codec.WriteFrame(s, api.CacheFetchRequest{Version: api.CacheFetchVersion, Prefix: k.Prefix, Split: k.Split}); err != nil {
		return nil, err
	}
	var resp api.CacheFetchResponse
	if _, err := c.n.codec.ReadFrame(s, &resp); err != nil {
		return nil, err
	}
	switch {
	case resp.Error != "":
		return nil, fmt.Errorf("autocache: peer %s: %s", addr, resp.Error)
	case !resp.Found:
		return nil, errNotHeld
	case resp.Size <= 0 || resp.Size > c.store.MaxBytes():
		return nil, fmt.Errorf("autocache: peer %s offers %d bytes (this node's bound %d)", addr, resp.Size, c.store.MaxBytes())
	}
	return c.store.Fetched(k, func(w io.Writer) error {
		_, err := io.CopyN(w, s, resp.Size)
		return err
	})
}

// fetchRemote reads split k from a live peer that holds it, or returns
// false.
func (c *nodeCache) fetchRemote(ctx context.Context, k autocache.Key, source string) (*autocache.FileReader, bool) {
	for _, m := range c.n.Members() {
		if m.Name == c.n.name || m.Status != api.StatusAlive || !m.Worker {
			continue
		}
		if !c.peerHolds(ctx, m, k) {
			continue
		}
		r, err := c.fetch(ctx, m.Addr, k)
		if err != nil && !errors.Is(err, errNotHeld) && ctx.Err() == nil {
			// Once more: a connection cached from before the peer
			// restarted fails the first stream, and is dropped then.
			r, err = c.fetch(ctx, m.Addr, k)
		}
		if err == nil && r.Header.Source != source {
			// The peer computed it from other input (one of them saw
			// the split's file before it was rewritten): not served.
			r.Close()
			err = fmt.Errorf("%w: its copy was computed from %q, the split's input is now %q", errNotHeld, r.Header.Source, source)
		}
		if err == nil {
			c.fetched.Add(1)
			return r, true
		}
		c.forget(m.Name, k.Prefix)
		if ctx.Err() != nil {
			return nil, false
		}
		c.n.log.Debug("autocache: fetch failed", "peer", m.Name, "prefix", k.Prefix, "split", k.Split, "err", err)
	}
	return nil, false
}

// peerHolds says whether m held k when last asked, asking again once the
// answer is older than HeldTTL.
func (c *nodeCache) peerHolds(ctx context.Context, m api.Member, k autocache.Key) bool {
	key := [2]string{m.Name, k.Prefix}
	c.peers.mu.Lock()
	v, ok := c.peers.views[key]
	c.peers.mu.Unlock()
	if !ok || time.Since(v.at) > c.n.cfg.Autocache.HeldTTL {
		actx, cancel := context.WithTimeout(ctx, c.n.cfg.ForwardAttemptTimeout)
		var resp api.CacheHeldResponse
		err := transport.Call(actx, c.n.tr, c.n.codec, m.Addr, api.MethodCacheHeld, api.CacheHeldRequest{Prefix: k.Prefix}, &resp)
		cancel()
		v = peerView{at: time.Now()}
		if err == nil && resp.Splits.Validate() == nil {
			v.splits = resp.Splits
		}
		c.peers.mu.Lock()
		if len(c.peers.views) >= maxPeerViews {
			clear(c.peers.views)
		}
		c.peers.views[key] = v
		c.peers.mu.Unlock()
	}
	return v.splits.Contains(k.Split)
}

func (c *nodeCache) forget(peer, prefix string) {
	c.peers.mu.Lock()
	delete(c.peers.views, [2]string{peer, prefix})
	c.peers.mu.Unlock()
}
