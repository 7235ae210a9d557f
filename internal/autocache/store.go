package autocache

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
)

// Config configures a Store.
type Config struct {
	// Dir holds the cache files, one directory per prefix fingerprint
	// (the mesh uses <data dir>/cache).
	Dir string
	// MaxBytes bounds the bytes of the cache files on this node (the
	// node's --cache-bytes). A new entry evicts the least recently used
	// ones until the total fits; an entry larger than the bound is not
	// kept. 0 turns the cache off: every autocache point computes.
	MaxBytes int64
	// ReadBytesPerSec, when > 0, throttles every read of a cache file (and
	// the throughput probe) to this rate: a stand-in for a slow disk in
	// tests and benchmarks.
	ReadBytesPerSec float64
	// ProbeBytes is the size of the file written and read back to measure
	// the read throughput (ReadThroughput). Default DefaultProbeBytes.
	ProbeBytes int64
	// Logger logs dropped files; nil discards.
	Logger *slog.Logger
}

// DefaultProbeBytes is Config.ProbeBytes's default.
const DefaultProbeBytes = 4 << 20

// ErrDisabled is returned by Create on a store with MaxBytes 0.
var ErrDisabled = errors.New("autocache: cache disabled (cache bytes 0)")

// ErrTooLarge is returned by a FileWriter whose entry outgrew MaxBytes.
var ErrTooLarge = errors.New("autocache: entry larger than the cache bound")

// Key names one cache entry: what the pipeline prefix with fingerprint
// Prefix yields for split Split.
type Key struct {
	Prefix string
	Split  int64
}

type entry struct {
	key  Key
	size int64
	gen  uint64 // changes when the file is replaced
}

// Store is a node's cache: files under Dir, an in-memory index of them
// rebuilt from the files at Open, bounded by MaxBytes with LRU eviction.
// Safe for concurrent use.
type Store struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	entries map[Key]*list.Element // of *entry
	lru     *list.List            // front: most recently used
	used    int64
	gen     uint64

	hits, misses, puts, evicted, corrupt, stale atomic.Int64
	probe                                       atomic.Uint64 // float64 bits of the last probe
	tmpSeq                                      atomic.Int64
}

// Stats are a store's counters.
type Stats struct {
	Entries  int   `json:"entries"`
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
	// Hits and Misses count Get calls; Puts committed entries; Evicted
	// entries dropped to stay within MaxBytes; Corrupt files dropped
	// because a check failed.
	Hits    int64 `json:"hits"`
	Misses  int64 `json:"misses"`
	Puts    int64 `json:"puts"`
	Evicted int64 `json:"evicted"`
	Corrupt int64 `json:"corrupt"`
	// Stale counts entries dropped because their split's input changed
	// since they were computed (GetSource).
	Stale int64 `json:"stale"`
	// ReadBytesPerSec is the last measured read throughput (0: never).
	ReadBytesPerSec float64 `json:"read_bytes_per_sec"`
}

// Open opens (creating) the store in cfg.Dir and rebuilds its index from
// the files there: a file whose header or trailer fails its checks, and
// any temporary file a crash left, is removed. Entries are ordered by
// their files' modification times (a Get touches its file), and the
// oldest evicted if the bound shrank.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("autocache: Dir is required")
	}
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("autocache: MaxBytes %d must be >= 0", cfg.MaxBytes)
	}
	if cfg.ProbeBytes <= 0 {
		cfg.ProbeBytes = DefaultProbeBytes
	}
	s := &Store{cfg: cfg, log: cfg.Logger, entries: map[Key]*list.Element{}, lru: list.New()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("autocache: %w", err)
	}
	type found struct {
		e     *entry
		mtime time.Time
	}
	var all []found
	dirs, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("autocache: %w", err)
	}
	for _, d := range dirs {
		p := filepath.Join(cfg.Dir, d.Name())
		if !d.IsDir() {
			os.Remove(p) // a probe file or a stray: nothing of ours lives here
			continue
		}
		files, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("autocache: %w", err)
		}
		for _, f := range files {
			fp := filepath.Join(p, f.Name())
			split, ok := parseName(f.Name())
			if !ok {
				s.log.Info("autocache: removing stray file", "path", fp)
				os.Remove(fp)
				continue
			}
			size, mtime, err := checkFile(fp, Key{Prefix: d.Name(), Split: split})
			if err != nil {
				s.log.Warn("autocache: dropping cache file", "path", fp, "err", err)
				s.corrupt.Add(1)
				os.Remove(fp)
				continue
			}
			s.gen++
			all = append(all, found{&entry{key: Key{Prefix: d.Name(), Split: split}, size: size, gen: s.gen}, mtime})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.Before(all[j].mtime) })
	for _, f := range all {
		s.entries[f.e.key] = s.lru.PushFront(f.e)
		s.used += f.e.size
	}
	s.mu.Lock()
	s.evictLocked()
	s.mu.Unlock()
	return s, nil
}

// parseName parses "<split>.fmc".
func parseName(name string) (int64, bool) {
	num, ok := strings.CutSuffix(name, ".fmc")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(num, 10, 64)
	return v, err == nil && v >= 0 && strconv.FormatInt(v, 10) == num
}

// checkFile checks a file's header and trailer against k.
func checkFile(path string, k Key) (int64, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, time.Time{}, err
	}
	r, err := OpenReader(f, st.Size(), nil)
	if err != nil {
		return 0, time.Time{}, err
	}
	if r.Header.Key() != k {
		return 0, time.Time{}, corrupt("file caches %+v, its name says %+v", r.Header.Key(), k)
	}
	return st.Size(), st.ModTime(), nil
}

func validPrefix(p string) error {
	if p == "" || len(p) > 128 {
		return fmt.Errorf("autocache: prefix fingerprint %q: want 1..128 hex digits", p)
	}
	for _, c := range p {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("autocache: prefix fingerprint %q: want hex digits", p)
		}
	}
	return nil
}

func (s *Store) path(k Key) string {
	return filepath.Join(s.cfg.Dir, k.Prefix, strconv.FormatInt(k.Split, 10)+".fmc")
}

// MaxBytes is the store's bound.
func (s *Store) MaxBytes() int64 { return s.cfg.MaxBytes }

// Has reports whether the store holds k (without touching it).
func (s *Store) Has(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[k]
	return ok
}

// Splits returns the splits the store holds for prefix, sorted.
func (s *Store) Splits(prefix string) []int64 {
	s.mu.Lock()
	var out []int64
	for k := range s.entries {
		if k.Prefix == prefix {
			out = append(out, k.Split)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{Entries: len(s.entries), Bytes: s.used, MaxBytes: s.cfg.MaxBytes}
	s.mu.Unlock()
	st.Hits, st.Misses, st.Puts = s.hits.Load(), s.misses.Load(), s.puts.Load()
	st.Evicted, st.Corrupt, st.Stale = s.evicted.Load(), s.corrupt.Load(), s.stale.Load()
	st.ReadBytesPerSec = float64frombits(s.probe.Load())
	return st
}

// FileReader reads one cached entry. Close it.
type FileReader struct {
	*Reader
	s    *Store
	f    *os.File
	key  Key
	gen  uint64
	temp string // a fetched file, removed on Close
}

// Next is Reader.Next; a corrupt record also drops the entry from the
// store, so it is never served again.
func (r *FileReader) Next() (int64, tensor.Element, error) {
	idx, el, err := r.Reader.Next()
	if err != nil && errors.Is(err, ErrCorrupt) {
		if r.temp != "" {
			r.s.corrupt.Add(1)
		} else {
			r.s.drop(r.key, r.gen, err)
		}
	}
	return idx, el, err
}

// Close closes the file (and removes a fetched one).
func (r *FileReader) Close() error {
	err := r.f.Close()
	if r.temp != "" {
		os.Remove(r.temp)
	}
	return err
}

// GetSource is Get for the prefix's output computed from the input
// source identifies (Header.Source): an entry computed from other input
// (the split's file rewritten since) is stale, and is dropped.
func (s *Store) GetSource(k Key, source string) (*FileReader, bool) { return s.get(k, &source) }

// touch marks entry k as just used (the LRU's front) and returns its
// generation; false if the store does not hold it.
func (s *Store) touch(k Key) (gen uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	le, ok := s.entries[k]
	if !ok {
		return 0, false
	}
	s.lru.MoveToFront(le)
	return le.Value.(*entry).gen, true
}

// Get opens the entry k, or returns false if the store does not hold it.
// A file that fails its header or trailer checks is dropped (false).
func (s *Store) Get(k Key) (*FileReader, bool) { return s.get(k, nil) }

// get is Get, and GetSource when source is not nil.
func (s *Store) get(k Key, source *string) (*FileReader, bool) {
	gen, ok := s.touch(k)
	if !ok {
		s.misses.Add(1)
		return nil, false
	}
	p := s.path(k)
	f, err := os.Open(p)
	if err != nil {
		s.drop(k, gen, err)
		s.misses.Add(1)
		return nil, false
	}
	st, err := f.Stat()
	var r *Reader
	if err == nil {
		r, err = OpenReader(f, st.Size(), s.throttle)
	}
	if err == nil && r.Header.Key() != k {
		err = corrupt("file caches %+v, want %+v", r.Header.Key(), k)
	}
	if err == nil && source != nil && r.Header.Source != *source {
		f.Close()
		s.dropStale(k, gen, r.Header.Source, *source)
		s.misses.Add(1)
		return nil, false
	}
	if err != nil {
		f.Close()
		s.drop(k, gen, err)
		s.misses.Add(1)
		return nil, false
	}
	now := time.Now()
	os.Chtimes(p, now, now) // the LRU order survives a restart
	s.hits.Add(1)
	return &FileReader{Reader: r, s: s, f: f, key: k, gen: gen}, true
}

// dropStale drops entry k (of generation gen), computed from input old
// that is now cur.
func (s *Store) dropStale(k Key, gen uint64, old, cur string) {
	s.mu.Lock()
	if le, ok := s.entries[k]; ok && le.Value.(*entry).gen == gen {
		s.removeLocked(le)
	}
	s.mu.Unlock()
	s.stale.Add(1)
	s.log.Info("autocache: the split's input changed since it was cached; computing it again", "prefix", k.Prefix, "split", k.Split, "cached_from", old, "now", cur)
}

// drop removes k if it is still the file of generation gen.
func (s *Store) drop(k Key, gen uint64, why error) {
	s.mu.Lock()
	le, ok := s.entries[k]
	if !ok || le.Value.(*entry).gen != gen {
		s.mu.Unlock()
		return
	}
	s.removeLocked(le)
	s.mu.Unlock()
	if errors.Is(why, ErrCorrupt) {
		s.corrupt.Add(1)
	}
	s.log.Warn("autocache: dropping cache file", "prefix", k.Prefix, "split", k.Split, "err", why)
}

func (s *Store) removeLocked(le *list.Element) {
	e := le.Value.(*entry)
	s.lru.Remove(le)
	delete(s.entries, e.key)
	s.used -= e.size
	os.Remove(s.path(e.key))
}

func (s *Store) evictLocked() {
	for s.used > s.cfg.MaxBytes && s.lru.Len() > 0 {
		s.removeLocked(s.lru.Back())
		s.evicted.Add(1)
	}
}
