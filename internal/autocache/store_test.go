package autocache

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

const fp = "ab12"

func element(i int64, size int) tensor.Element {
	data := bytes.Repeat([]byte{byte(i)}, size)
	return tensor.Element{Tensors: []tensor.Tensor{
		tensor.ScalarInt64("value", i),
		tensor.BytesVector("payload", [][]byte{data, []byte("x")}),
	}}
}

func put(t *testing.T, s *Store, k Key, n int, size int) {
	t.Helper()
	w, err := s.Create(k, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := w.Add(int64(2*i), element(int64(i), size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// readAll returns the indices and values read, and the error that ended
// the reading (nil at io.EOF).
func readAll(r *FileReader) ([]int64, error) {
	defer r.Close()
	var out []int64
	for {
		idx, el, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		v, _ := el.Tensors[0].Int64Value()
		if idx != 2*v {
			return out, errors.New("index and value disagree")
		}
		out = append(out, idx)
	}
}

func TestPutGet(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{fp, 7}
	if _, ok := s.Get(k); ok {
		t.Fatal("empty store hit")
	}
	put(t, s, k, 5, 10)
	r, ok := s.Get(k)
	if !ok {
		t.Fatal("miss after put")
	}
	got, err := readAll(r)
	if err != nil || len(got) != 5 || got[4] != 8 {
		t.Fatalf("read %v, %v", got, err)
	}
	if st := s.Stats(); st.Entries != 1 || st.Puts != 1 || st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLRUBound(t *testing.T) {
	dir := t.TempDir()
	// Each entry: 4 elements of ~1 KB.
	s, err := Open(Config{Dir: dir, MaxBytes: 13 << 10}) // 3 entries of 4 elements of ~1 KB fit, not 4
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		put(t, s, Key{fp, i}, 4, 1000)
	}
	s.Get(Key{fp, 0}) // 0 is now the most recent: 1 is the oldest
	put(t, s, Key{fp, 3}, 4, 1000)
	if s.Has(Key{fp, 1}) || !s.Has(Key{fp, 0}) || !s.Has(Key{fp, 3}) {
		t.Fatalf("after eviction holds %v, want 1 evicted", s.Splits(fp))
	}
	st := s.Stats()
	if st.Bytes > st.MaxBytes || st.Evicted != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := os.Stat(s.path(Key{fp, 1})); !os.IsNotExist(err) {
		t.Fatalf("evicted file still there: %v", err)
	}
	// An entry larger than the bound is refused, and nothing is evicted for it.
	w, _ := s.Create(Key{fp, 9}, "")
	var aerr error
	for i := 0; i < 20 && aerr == nil; i++ {
		aerr = w.Add(int64(i), element(int64(i), 1000))
	}
	if !errors.Is(aerr, ErrTooLarge) {
		t.Fatalf("oversized entry: %v", aerr)
	}
	w.Abort()
	if len(s.Splits(fp)) != 3 {
		t.Fatalf("holds %v after a refused entry", s.Splits(fp))
	}
}

func TestRestartKeepsEntriesAndOrder(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(Config{Dir: dir, MaxBytes: 1 << 20})
	put(t, s, Key{fp, 1}, 3, 10)
	put(t, s, Key{fp, 2}, 3, 10)
	// A crash mid-put leaves a temporary file: removed at restart.
	w, _ := s.Create(Key{fp, 3}, "")
	w.Add(0, element(0, 10))
	w.Writer.w.Flush()
	s2, err := Open(Config{Dir: dir, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Splits(fp); len(got) != 2 {
		t.Fatalf("after restart holds %v, want [1 2]", got)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, fp, "*.tmp-*"))
	if len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
	r, ok := s2.Get(Key{fp, 2})
	if !ok {
		t.Fatal("miss after restart")
	}
	if got, err := readAll(r); err != nil || len(got) != 3 {
		t.Fatalf("read %v, %v", got, err)
	}
	// A smaller bound at restart evicts down to it.
	s3, _ := Open(Config{Dir: dir, MaxBytes: 1})
	if st := s3.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("bound 1: %+v", st)
	}
}

func TestCorruptAndTruncatedNeverServed(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
		// atOpen: detected when the file is opened (nothing served).
		atOpen bool
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-30] }, true},
		{"trailer cut", func(b []byte) []byte { return b[:len(b)-1] }, true},
		{"header bit", func(b []byte) []byte { b[7] ^= 1; return b }, true},
		{"record bit", func(b []byte) []byte { b[len(b)-trailerSize-5] ^= 0x10; return b }, false},
		{"appended", func(b []byte) []byte { return append(b, 0) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := Open(Config{Dir: dir, MaxBytes: 1 << 20})
			k := Key{fp, 4}
			put(t, s, k, 6, 50)
			p := s.path(k)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, c.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			r, ok := s.Get(k)
			if c.atOpen {
				if ok {
					r.Close()
					t.Fatal("damaged file opened")
				}
			} else {
				if !ok {
					t.Fatal("want the damage found while reading")
				}
				got, err := readAll(r)
				if !errors.Is(err, ErrCorrupt) || len(got) != 5 {
					t.Fatalf("read %v then %v, want 5 good elements then ErrCorrupt", got, err)
				}
			}
			if s.Has(k) || s.Stats().Corrupt != 1 {
				t.Fatalf("damaged entry kept: %+v", s.Stats())
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatal("damaged file left on disk")
			}
		})
	}
	// Damage found at restart: the file is dropped from the index.
	dir := t.TempDir()
	s, _ := Open(Config{Dir: dir, MaxBytes: 1 << 20})
	put(t, s, Key{fp, 1}, 2, 10)
	p := s.path(Key{fp, 1})
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)/2], 0o644)
	s2, _ := Open(Config{Dir: dir, MaxBytes: 1 << 20})
	if s2.Has(Key{fp, 1}) || s2.Stats().Corrupt != 1 {
		t.Fatalf("truncated file indexed at restart: %+v", s2.Stats())
	}
}

func TestThrottledProbe(t *testing.T) {
	s, _ := Open(Config{Dir: t.TempDir(), MaxBytes: 1 << 20, ReadBytesPerSec: 8 << 20, ProbeBytes: 1 << 20})
	rate, err := s.ReadThroughput()
	if err != nil {
		t.Fatal(err)
	}
	// The throttle makes reading 1 MiB take at least 1/8 s: the measured
	// rate cannot exceed the limit (a bound, not a timing guess).
	if rate > 8<<20 || rate <= 0 {
		t.Fatalf("probe %.0f B/s with a limit of %d", rate, 8<<20)
	}
}

func TestCreateRefusesBadKeys(t *testing.T) {
	s, _ := Open(Config{Dir: t.TempDir(), MaxBytes: 1 << 20})
	for _, k := range []Key{{"", 1}, {"../x", 1}, {"AB", 1}, {fp, -1}} {
		if w, err := s.Create(k, ""); err == nil {
			w.Abort()
			t.Errorf("Create(%+v) accepted", k)
		}
	}
	off, _ := Open(Config{Dir: t.TempDir()})
	if _, err := off.Create(Key{fp, 1}, ""); !errors.Is(err, ErrDisabled) {
		t.Errorf("disabled store: %v", err)
	}
}

func TestRawAndFetched(t *testing.T) {
	a, _ := Open(Config{Dir: t.TempDir(), MaxBytes: 1 << 20})
	b, _ := Open(Config{Dir: t.TempDir(), MaxBytes: 1 << 20})
	k := Key{fp, 2}
	put(t, a, k, 4, 30)
	f, size, ok := a.OpenRaw(k)
	if !ok {
		t.Fatal("OpenRaw missed")
	}
	r, err := b.Fetched(k, func(w io.Writer) error { _, err := io.CopyN(w, f, size); return err })
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	temp := r.temp
	if got, err := readAll(r); err != nil || len(got) != 4 {
		t.Fatalf("fetched: %v, %v", got, err)
	}
	if _, err := os.Stat(temp); !os.IsNotExist(err) || b.Has(k) {
		t.Fatal("a fetched file outlives its reader, or became an entry")
	}
	// Cut in transit: refused.
	f, size, _ = a.OpenRaw(k)
	defer f.Close()
	if _, err := b.Fetched(k, func(w io.Writer) error { _, err := io.CopyN(w, f, size-5); return err }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a cut transfer: %v", err)
	}
}

// TestGetSource: an entry is served only to a reader whose split's input
// is the one it was computed from; a stale entry is dropped and counted.
func TestGetSource(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Prefix: "abcdef01", Split: 4}
	w, err := s.Create(k, "size=10,mtime=1")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(0, tensor.Element{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	r, ok := s.GetSource(k, "size=10,mtime=1")
	if !ok {
		t.Fatal("the entry of the same input was not served")
	}
	r.Close()
	if _, ok := s.GetSource(k, "size=10,mtime=2"); ok {
		t.Fatal("an entry computed from other input was served")
	}
	if st := s.Stats(); st.Stale != 1 || st.Entries != 0 {
		t.Fatalf("stats %+v: want the stale entry dropped and counted", st)
	}
	if _, ok := s.GetSource(k, "size=10,mtime=1"); ok {
		t.Fatal("a dropped entry was served")
	}
}
