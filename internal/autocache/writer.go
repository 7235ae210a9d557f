package autocache

// Writing an entry of the store (store.go): to a temporary file, renamed
// into place on Commit.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/feedmesh/feedmesh/tensor"
)

// FileWriter writes one entry to a temporary file; Commit makes it the
// entry, Abort throws it away. Exactly one of them must be called.
type FileWriter struct {
	*Writer
	s    *Store
	f    *os.File
	tmp  string
	key  Key
	done bool
}

// Create starts writing entry k, the prefix's output computed from the
// split's input as source identifies it (Header.Source).
func (s *Store) Create(k Key, source string) (*FileWriter, error) {
	if s.cfg.MaxBytes <= 0 {
		return nil, ErrDisabled
	}
	if err := validPrefix(k.Prefix); err != nil {
		return nil, err
	}
	if k.Split < 0 {
		return nil, fmt.Errorf("autocache: split %d", k.Split)
	}
	dir := filepath.Join(s.cfg.Dir, k.Prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("autocache: %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", s.path(k), s.tmpSeq.Add(1))
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("autocache: %w", err)
	}
	w, err := NewWriter(f, Header{Prefix: k.Prefix, Split: k.Split, Source: source})
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &FileWriter{Writer: w, s: s, f: f, tmp: tmp, key: k}, nil
}

// Add is Writer.Add, failing with ErrTooLarge once the entry outgrows the
// store's bound.
func (w *FileWriter) Add(index int64, el tensor.Element) error {
	if err := w.Writer.Add(index, el); err != nil {
		return err
	}
	if w.Bytes() > w.s.cfg.MaxBytes {
		return ErrTooLarge
	}
	return nil
}

// Commit finishes, syncs and installs the entry, evicting the least
// recently used entries beyond the bound.
func (w *FileWriter) Commit() error {
	if w.done {
		return errors.New("autocache: writer already finished")
	}
	w.done = true
	err := w.Finish()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	var size int64
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(w.tmp); err == nil {
			size = st.Size()
			if size > w.s.cfg.MaxBytes {
				err = ErrTooLarge
			}
		}
	}
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = os.Rename(w.tmp, s.path(w.key))
	}
	if err != nil {
		os.Remove(w.tmp)
		return err
	}
	if le, ok := s.entries[w.key]; ok { // replaced by the rename
		e := le.Value.(*entry)
		s.lru.Remove(le)
		delete(s.entries, w.key)
		s.used -= e.size
	}
	s.gen++
	s.entries[w.key] = s.lru.PushFront(&entry{key: w.key, size: size, gen: s.gen})
	s.used += size
	s.puts.Add(1)
	s.evictLocked()
	return nil
}

// Abort discards the entry being written.
func (w *FileWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.tmp)
}
