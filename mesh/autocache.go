package mesh

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/autocache"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
)

// AutocacheConfig tunes the autocache (docs/jobs/autocache.md). The cache's
// bound is Config.CacheBytes.
type AutocacheConfig struct {
	// ProfileElements is how many elements of a prefix a worker computes
	// (putting them) before it decides whether caching the prefix pays
	// (Cachew profiles ~300 batches). Default 300.
	ProfileElements int64
	// ReadBytesPerSec, when > 0, throttles this node's cache reads (and
	// the throughput it measures) to this rate: a stand-in for a slow
	// disk in tests and benchmarks.
	ReadBytesPerSec float64
	// ProbeBytes is the size of the file the node reads back to measure
	// its cache read throughput when it decides. Default 4 MiB.
	ProbeBytes int64
	// HeldTTL is how long a worker trusts what a peer said it holds
	// before asking again (cachefetch.go): a split put on a peer within
	// this time may be missed and computed again. Default 100 ms.
	HeldTTL time.Duration
	// FetchTimeout bounds fetching one cached split from a peer (and
	// serving one). Default 60 s.
	FetchTimeout time.Duration
	// MaxServing bounds the cached splits this node sends at once; a
	// fetch beyond it is refused and its reader computes the split.
	// Default 8.
	MaxServing int
}

// DefaultCacheBytes is Config.CacheBytes's default (the node flag
// --cache-bytes).
const DefaultCacheBytes = 1 << 30

// cacheDir is where the cache files live under the data dir.
const cacheDir = "cache"

// autocacheKeyPrefix prefixes the Raft KV keys of the decisions.
const autocacheKeyPrefix = "autocache/"

// nodeCache is a node's side of the autocache: its disk store, the
// decisions it knows, and the profiles it gathers until one is made.
type nodeCache struct {
	n     *Node
	store *autocache.Store // nil: caching off (CacheBytes 0)

	mu        sync.Mutex
	decisions map[string]api.AutocacheDecision // by prefix
	profiles  map[string]*autocache.Profile
	deciding  map[string]bool
	points    map[string][]pipeline.AutocachePoint // by dataset fingerprint

	peers   peerViews    // cachefetch.go
	fetched atomic.Int64 // splits read from peers
	// wg: the cache streams served and the decisions being made; the node
	// waits for them once its transport is closed.
	wg sync.WaitGroup
}

func (n *Node) openCache() error {
	c := &nodeCache{n: n, decisions: map[string]api.AutocacheDecision{}, profiles: map[string]*autocache.Profile{},
		deciding: map[string]bool{}, points: map[string][]pipeline.AutocachePoint{}}
	c.peers.views = map[[2]string]peerView{}
	n.cache = c
	c.wg.Add(1)
	go n.serveCache(n.tr.Listener(transport.KindCache))
	if n.cfg.CacheBytes == 0 {
		return nil
	}
	s, err := autocache.Open(autocache.Config{
		Dir: filepath.Join(n.cfg.DataDir, cacheDir), MaxBytes: n.cfg.CacheBytes,
		ReadBytesPerSec: n.cfg.Autocache.ReadBytesPerSec, ProbeBytes: n.cfg.Autocache.ProbeBytes,
		Logger: n.log.With("component", "autocache"),
	})
	if err != nil {
		return fmt.Errorf("open the autocache: %w", err)
	}
	c.store = s
	return nil
}

// CacheStats returns the node's autocache store counters (zero when
// caching is off).
func (n *Node) CacheStats() CacheStats {
	if n.cache == nil || n.cache.store == nil {
		return CacheStats{}
	}
	return CacheStats{Stats: n.cache.store.Stats(), Fetched: n.cache.fetched.Load()}
}

// CacheStats are a node's autocache counters: its store's, and the splits
// it read from peers.
type CacheStats struct {
	autocache.Stats
	Fetched int64 `json:"fetched"`
}

// decision returns the decision known for prefix.
func (c *nodeCache) decision(prefix string) (api.AutocacheDecision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.decisions[prefix]
	return d, ok
}

func (c *nodeCache) learn(prefix string, raw []byte) (api.AutocacheDecision, error) {
	var d api.AutocacheDecision
	if err := cbor.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("decode the autocache decision of %s: %w", prefix, err)
	}
	c.mu.Lock()
	c.decisions[prefix] = d
	delete(c.profiles, prefix)
	c.mu.Unlock()
	return d, nil
}

// refresh asks the cluster for the decisions of the auto points this node
// does not know yet (once per pipeline a task opens).
func (c *nodeCache) refresh(ctx context.Context, pts []pipeline.AutocachePoint) {
	for _, p := range pts {
		if p.Mode != pipeline.AutocacheAuto {
			continue
		}
		if _, ok := c.decision(p.Prefix); ok {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, c.n.cfg.RequestTimeout)
		raw, found, err := c.n.Get(ctx, autocacheKeyPrefix+p.Prefix, false)
		cancel()
		if err != nil {
			c.n.log.Debug("autocache: decision not read; profiling", "prefix", p.Prefix, "err", err)
			continue
		}
		if found {
			if _, err := c.learn(p.Prefix, raw); err != nil {
				c.n.log.Warn("autocache", "err", err)
			}
		}
	}
}

// observe adds a split's profile; the first time a prefix has enough, it
// decides (in a goroutine the worker owns: it measures the disk and
// writes to Raft).
func (c *nodeCache) observe(p pipeline.AutocachePoint, job string, elements, nanos, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.decisions[p.Prefix]; ok || c.deciding[p.Prefix] {
		return
	}
	pr := c.profiles[p.Prefix]
	if pr == nil {
		pr = &autocache.Profile{}
		c.profiles[p.Prefix] = pr
	}
	pr.Elements += elements
	pr.ComputeNanos += nanos
	pr.Bytes += bytes
	if pr.Elements < c.n.cfg.Autocache.ProfileElements {
		return
	}
	c.deciding[p.Prefix] = true
	prof := *pr
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.decide(c.n.ctx, p.Prefix, job, prof)
		c.mu.Lock()
		delete(c.deciding, p.Prefix)
		c.mu.Unlock()
		if err != nil && c.n.ctx.Err() == nil {
			c.n.log.Warn("autocache: no decision yet", "prefix", p.Prefix, "err", err)
		}
	}()
}

// decide measures this node's cache read throughput, applies the policy
// to prof and records the decision in Raft unless one is there (which it
// then adopts).
func (c *nodeCache) decide(ctx context.Context, prefix, job string, prof autocache.Profile) error {
	rate, err := c.store.ReadThroughput()
	if err != nil {
		return err
	}
	prof.ReadBytesPerSec = rate
	d, err := autocache.Decide(prof, autocache.DecideN)
	if err != nil {
		return err
	}
	rec := api.AutocacheDecision{Cache: d.Cache, N: d.N, ComputeSeconds: d.Compute.Seconds(), ReadSeconds: d.Read.Seconds(),
		BytesPerElement: d.BytesPerElement, ReadBytesPerSec: d.ReadBytesPerSec, Elements: prof.Elements, Worker: c.n.name, Job: job}
	raw, err := cbor.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.n.cfg.RequestTimeout)
	defer cancel()
	resp, err := c.n.put(ctx, api.PutRequest{Key: autocacheKeyPrefix + prefix, Value: raw, IfAbsent: true})
	if err != nil {
		return fmt.Errorf("record the decision: %w", err)
	}
	won, err := c.learn(prefix, resp.Value)
	if err == nil {
		c.n.log.Info("autocache decision", "prefix", prefix, "job", job, "cache", won.Cache, "by", won.Worker,
			"compute_s_per_n", won.ComputeSeconds, "read_s_per_n", won.ReadSeconds, "n", won.N)
	}
	return err
}

// specPoints returns (and remembers) the autocache points of a dataset.
func (c *nodeCache) specPoints(fp string, spec func() (*pipeline.Spec, error)) []pipeline.AutocachePoint {
	c.mu.Lock()
	pts, ok := c.points[fp]
	c.mu.Unlock()
	if ok {
		return pts
	}
	s, err := spec()
	if err == nil {
		pts, err = s.AutocachePoints()
	}
	if err != nil {
		return nil
	}
	c.mu.Lock()
	if len(c.points) > 1024 { // a bound on datasets remembered
		clear(c.points)
	}
	c.points[fp] = pts
	c.mu.Unlock()
	return pts
}

// autocacheInfo is JobInfo.Autocache for a dataset.
func (n *Node) autocacheInfo(fp string) []api.AutocacheInfo {
	if n.cache == nil {
		return nil
	}
	pts := n.cache.specPoints(fp, func() (*pipeline.Spec, error) {
		d, ok := n.raft.Dataset(fp)
		if !ok {
			return nil, errors.New("no dataset")
		}
		return pipeline.DecodeCanonical(d.Spec)
	})
	var out []api.AutocacheInfo
	for _, p := range pts {
		a := api.AutocacheInfo{Op: p.Op, Mode: p.Mode, Prefix: p.Prefix}
		if raw, ok := n.raft.Get(autocacheKeyPrefix + p.Prefix); ok {
			var d api.AutocacheDecision
			if cbor.Unmarshal(raw, &d) == nil {
				a.Decision = &d
			}
		}
		out = append(out, a)
	}
	return out
}

// taskCache is a task's pipeline.Cache: the node's store, used as the
// point's mode and the recorded decision say.
type taskCache struct {
	c   *nodeCache
	job string
}

// taskCache returns the Cache for a task's pipeline of job, or nil when
// its spec has no autocache op or the node caches nothing (the op then
// passes elements through). It first learns the decisions already
// recorded.
func (c *nodeCache) taskCache(ctx context.Context, job api.JobInfo, spec *pipeline.Spec) pipeline.Cache {
	if c == nil || c.store == nil {
		return nil
	}
	pts := c.specPoints(job.Fingerprint, func() (*pipeline.Spec, error) { return spec, nil })
	if len(pts) == 0 {
		return nil
	}
	c.refresh(ctx, pts)
	return &taskCache{c: c, job: job.Name}
}

func (tc *taskCache) Use(p pipeline.AutocachePoint) bool {
	switch p.Mode {
	case pipeline.AutocacheCompute:
		return false
	case pipeline.AutocacheCache:
		return true
	}
	if d, ok := tc.c.decision(p.Prefix); ok {
		return d.Cache
	}
	return true // profiling: put, so the first epoch is cached either way
}

func (tc *taskCache) Get(ctx context.Context, p pipeline.AutocachePoint, split int64, source string) (pipeline.CachedSplit, bool) {
	k := autocache.Key{Prefix: p.Prefix, Split: split}
	if r, ok := tc.c.store.GetSource(k, source); ok {
		return r, true
	}
	if r, ok := tc.c.fetchRemote(ctx, k, source); ok {
		return r, true
	}
	return nil, false
}

func (tc *taskCache) Put(p pipeline.AutocachePoint, split int64, source string) (pipeline.CacheWriter, error) {
	return tc.c.store.Create(autocache.Key{Prefix: p.Prefix, Split: split}, source)
}

func (tc *taskCache) Observe(p pipeline.AutocachePoint, elements, nanos, bytes int64) {
	if p.Mode == pipeline.AutocacheAuto {
		tc.c.observe(p, tc.job, elements, nanos, bytes)
	}
}

// held returns what a task's leases tell the leader this node holds of
// job's cached splits (api.LeaseRequest.Held), or nil when its spec has no
// autocache point that may read the cache.
func (c *nodeCache) held(job api.JobInfo, spec *pipeline.Spec) func() ranges.Set {
	if c == nil || c.store == nil {
		return nil
	}
	pts := c.specPoints(job.Fingerprint, func() (*pipeline.Spec, error) { return spec, nil })
	if len(pts) != 1 || pts[0].Mode == pipeline.AutocacheCompute {
		return nil
	}
	p := pts[0]
	return func() ranges.Set {
		if p.Mode == pipeline.AutocacheAuto {
			if d, ok := c.decision(p.Prefix); ok && !d.Cache {
				return nil
			}
		}
		var r ranges.Set
		for _, s := range c.store.Splits(p.Prefix) {
			if r.Intervals() >= api.MaxHeldIntervals {
				break
			}
			r.Add(s)
		}
		return r
	}
}

// preferHeld is what a lease of req prefers: the splits the worker's
// cache holds (nil when it holds none, or the hint is malformed: the
// lease then goes on without it).
func preferHeld(req api.LeaseRequest) ranges.Set {
	if len(req.Held) == 0 || req.Held.Validate() != nil || req.Held.Intervals() > min(api.MaxHeldIntervals, fsm.MaxPreferIntervals) {
		return nil
	}
	return req.Held
}
