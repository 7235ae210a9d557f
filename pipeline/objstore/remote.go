package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// rangeFetcher reads bytes [off, off+len(p)) of one version of an object.
type rangeFetcher interface {
	fetchRange(ctx context.Context, off int64, p []byte) error
}

// remoteFile reads an object through a small cache of chunks. A chunk is
// fetched by one goroutine, counted in wg and bounded by the Store's
// semaphore; Close cancels them all and waits for them.
type remoteFile struct {
	name    string
	size    int64
	version string
	store   *Store
	fetch   rangeFetcher

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	chunks map[int64]*chunk
	lru    []int64 // chunk indices, least recently used first
	last   int64   // the chunk read last, -1 before any
}

type chunk struct {
	done chan struct{}
	data []byte
	err  error
}

func newRemoteFile(s *Store, name string, size int64, version string, f rangeFetcher) *remoteFile {
	ctx, cancel := context.WithCancel(context.Background())
	return &remoteFile{name: name, size: size, version: version, store: s, fetch: f, ctx: ctx, cancel: cancel,
		chunks: map[int64]*chunk{}, last: -1}
}

func (f *remoteFile) Size() int64 { return f.size }

// Version is the object's ETag when it was opened ("" if it has none):
// every read is of that version.
func (f *remoteFile) Version() string { return f.version }

// capacity is how many chunks the file keeps.
func (f *remoteFile) capacity() int { return f.store.cfg.ReadAheadChunks + 1 }

func (f *remoteFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", f.name, off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	cb := f.store.cfg.ChunkBytes
	n := 0
	for n < len(p) && off < f.size {
		idx := off / cb
		c, err := f.chunk(idx, true)
		if err != nil {
			return n, err
		}
		k := copy(p[n:], c.data[off-idx*cb:])
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// chunk returns chunk idx, fetching it if needed. A read (use) of the
// chunk after the previous one, or of the same one, starts the read-ahead.
func (f *remoteFile) chunk(idx int64, use bool) (*chunk, error) {
	f.mu.Lock()
	if f.ctx.Err() != nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("%s: read after close", f.name)
	}
	c := f.startLocked(idx)
	if use {
		if idx == f.last || idx == f.last+1 {
			for j := idx + 1; j <= idx+int64(f.store.cfg.ReadAheadChunks); j++ {
				f.startLocked(j)
			}
		}
		f.last = idx
	}
	f.mu.Unlock()
	select {
	case <-c.done:
	case <-f.ctx.Done():
		return nil, fmt.Errorf("%s: read after close", f.name)
	}
	if c.err != nil {
		// Forget a failed chunk, so that a later read asks again.
		f.mu.Lock()
		if f.chunks[idx] == c {
			delete(f.chunks, idx)
		}
		f.mu.Unlock()
		return nil, c.err
	}
	return c, nil
}

// startLocked returns chunk idx, starting its fetch when it is not held,
// and marks it most recently used; it evicts the least recently used
// chunks beyond the capacity. Chunks past the end are not started.
func (f *remoteFile) startLocked(idx int64) *chunk {
	cb := f.store.cfg.ChunkBytes
	if c, ok := f.chunks[idx]; ok {
		f.touchLocked(idx)
		return c
	}
	c := &chunk{done: make(chan struct{})}
	if idx*cb >= f.size {
		c.err = io.EOF
		close(c.done)
		return c
	}
	f.chunks[idx] = c
	f.touchLocked(idx)
	for len(f.lru) > f.capacity() {
		delete(f.chunks, f.lru[0])
		f.lru = f.lru[1:]
	}
	start := idx * cb
	n := min(cb, f.size-start)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(c.done)
		buf := make([]byte, n)
		if err := f.fetchBounded(f.ctx, start, buf); err != nil {
			c.err = err
			return
		}
		c.data = buf
	}()
	return c
}

func (f *remoteFile) touchLocked(idx int64) {
	if i := slices.Index(f.lru, idx); i >= 0 {
		f.lru = slices.Delete(f.lru, i, i+1)
	}
	f.lru = append(f.lru, idx)
}

// Range is a byte range [Off, Off+N) of a file.
type Range struct{ Off, N int64 }

// ReadRanges reads whole byte ranges at once, bypassing the chunk cache:
// each range is cut into requests of at most ChunkBytes, all sent
// concurrently (within the Store's MaxConcurrentReads). Parquet reads a
// row group's column chunks this way: the columns are decoded in step,
// which would thrash a cache of a few chunks.
func (f *remoteFile) ReadRanges(ctx context.Context, rs []Range) ([][]byte, error) {
	out := make([][]byte, len(rs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cb := f.store.cfg.ChunkBytes
	for i, r := range rs {
		if r.Off < 0 || r.N < 0 || r.Off+r.N > f.size {
			return nil, &NamedError{Name: f.name, Err: fmt.Errorf("range [%d, %d) outside the object's %d bytes", r.Off, r.Off+r.N, f.size)}
		}
		out[i] = make([]byte, r.N)
		for off := int64(0); off < r.N; off += cb {
			buf := out[i][off:min(off+cb, r.N)]
			start := r.Off + off
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := f.fetchBounded(ctx, start, buf)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// fetchBounded fetches one request's bytes under the Store's bound, with
// retries.
func (f *remoteFile) fetchBounded(ctx context.Context, start int64, buf []byte) error {
	select {
	case f.store.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.store.sem }()
	err := f.store.retry(ctx, func() error { return f.fetch.fetchRange(ctx, start, buf) })
	if err != nil {
		var named *NamedError
		if !errors.As(err, &named) {
			err = &NamedError{Name: f.name, Err: fmt.Errorf("read bytes [%d, %d): %w", start, start+int64(len(buf)), err)}
		}
	}
	return err
}

// Close cancels the fetches in flight and waits for them.
func (f *remoteFile) Close() error {
	f.cancel()
	f.wg.Wait()
	return nil
}

// NamedError is an error about one object, named in its message.
type NamedError struct {
	Name string
	Err  error
}

func (e *NamedError) Error() string { return e.Name + ": " + e.Err.Error() }
func (e *NamedError) Unwrap() error { return e.Err }
