package autocache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Entries between nodes: the cache is one for the mesh, so a node reads a
// split another node holds from the file that node sends as it is on disk
// (mesh/cachefetch.go), checked again on arrival and not kept.

// OpenRaw opens entry k's file as it is on disk, to send it to another
// node, after checking its header and trailer (a bad file is dropped, and
// false returned). The receiver checks every record again.
func (s *Store) OpenRaw(k Key) (*os.File, int64, bool) {
	gen, ok := s.touch(k)
	if !ok {
		return nil, 0, false
	}
	f, err := os.Open(s.path(k))
	if err != nil {
		s.drop(k, gen, err)
		return nil, 0, false
	}
	st, err := f.Stat()
	if err == nil {
		var r *Reader
		if r, err = OpenReader(f, st.Size(), nil); err == nil && r.Header.Key() != k {
			err = corrupt("file caches %+v, want %+v", r.Header, k)
		}
	}
	if err != nil {
		f.Close()
		s.drop(k, gen, err)
		return nil, 0, false
	}
	return f, st.Size(), true
}

// Fetched reads entry k as another node sent it: fill writes the file's
// bytes to a temporary file under Dir, which is then checked like a local
// entry (header and trailer now, each record as it is read) and removed
// when the reader is closed. It is not kept as an entry of this store:
// the cache is one for the mesh, and the node that holds the split keeps
// it.
func (s *Store) Fetched(k Key, fill func(io.Writer) error) (*FileReader, error) {
	if err := validPrefix(k.Prefix); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.cfg.Dir, k.Prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("autocache: %w", err)
	}
	p := fmt.Sprintf("%s.fetch-%d", s.path(k), s.tmpSeq.Add(1))
	f, err := os.Create(p)
	if err != nil {
		return nil, fmt.Errorf("autocache: %w", err)
	}
	fail := func(err error) (*FileReader, error) {
		f.Close()
		os.Remove(p)
		return nil, err
	}
	if err := fill(f); err != nil {
		return fail(err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	r, err := OpenReader(f, st.Size(), s.throttle)
	if err == nil && r.Header.Key() != k {
		err = corrupt("fetched file caches %+v, want %+v", r.Header, k)
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			s.corrupt.Add(1)
		}
		return fail(err)
	}
	return &FileReader{Reader: r, s: s, f: f, key: k, temp: p}, nil
}
