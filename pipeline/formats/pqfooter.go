package formats

import (
	"container/list"
	"context"
	"io"
	"sync"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// footerBytes is how much of a remote file's end is read at once to
// decode its footer: most footers fit; a larger one is read on through
// the file's chunks.
const footerBytes = 64 << 10

// FooterCacheEntries bounds the remote Parquet footers a process keeps
// (each at most footerBytes: 16 MiB in all). A worker reads a file's
// footer when it lists a job's splits and again for each row group it
// reads; the cache saves the second and later range requests.
const FooterCacheEntries = 256

// footerReader returns what to decode a file's footer from: a remote
// file's last footerBytes, read by one range request or found in the
// footer cache (the chunk cache would fetch a whole chunk, ChunkBytes,
// for the few bytes at the end), else the file itself.
func footerReader(ctx context.Context, f objstore.File, path string) (io.ReaderAt, error) {
	rr, ok := f.(objstore.RangeReader)
	if !ok {
		return f, nil
	}
	n := min(f.Size(), footerBytes)
	rs := []objstore.Range{{Off: f.Size() - n, N: n}}
	var key footerKey
	if v, ok := f.(objstore.Versioned); ok && v.Version() != "" {
		key = footerKey{path: path, size: f.Size(), version: v.Version()}
		if b, ok := footers.get(key); ok {
			return &bufferedRanges{f: f, rs: rs, bufs: [][]byte{b}}, nil
		}
	}
	bufs, err := rr.ReadRanges(ctx, rs)
	if err != nil {
		return nil, err
	}
	if key.version != "" {
		footers.put(key, bufs[0])
	}
	return &bufferedRanges{f: f, rs: rs, bufs: bufs}, nil
}

type footerKey struct {
	path    string
	size    int64
	version string
}

// footerCache is an LRU of file tails, shared by the process.
type footerCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of footerKey, most recent first
	m     map[footerKey]footerEntry
}

type footerEntry struct {
	b  []byte
	el *list.Element
}

var footers = &footerCache{max: FooterCacheEntries, order: list.New(), m: map[footerKey]footerEntry{}}

func (c *footerCache) get(k footerKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e.el)
	return e.b, true
}

func (c *footerCache) put(k footerKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.order.MoveToFront(e.el)
		return
	}
	c.m[k] = footerEntry{b: b, el: c.order.PushFront(k)}
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Back()).(footerKey)
		delete(c.m, old)
	}
}
