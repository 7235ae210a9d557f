package autocache

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// How fast the store reads: measured (ReadThroughput, which Decide weighs
// against computing) and, standing in for a slow disk in tests and
// benchmarks, throttled (Config.ReadBytesPerSec).

// ReadThroughput measures how fast this store reads: it writes
// ProbeBytes to a file in Dir, syncs it, reads it back as a Get would
// (throttled when configured), and returns bytes per second. The page
// cache usually still holds the file, so on a real disk this is the
// optimistic rate of a recently written entry, as the entries a job put in
// its first epoch are.
func (s *Store) ReadThroughput() (float64, error) {
	p := filepath.Join(s.cfg.Dir, fmt.Sprintf("probe-%d", s.tmpSeq.Add(1)))
	buf := make([]byte, 256<<10)
	rand.Read(buf)
	f, err := os.Create(p)
	if err != nil {
		return 0, fmt.Errorf("autocache: probe: %w", err)
	}
	defer os.Remove(p)
	for n := int64(0); n < s.cfg.ProbeBytes && err == nil; n += int64(len(buf)) {
		_, err = f.Write(buf)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("autocache: probe: %w", err)
	}
	defer f.Close()
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, s.throttle(f), buf)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("autocache: probe: %w", err)
	}
	rate := float64(n) / max(d.Seconds(), 1e-9)
	s.probe.Store(float64bits(rate))
	return rate, nil
}

// throttle wraps r in the configured read limit.
func (s *Store) throttle(r io.Reader) io.Reader {
	if s.cfg.ReadBytesPerSec <= 0 {
		return r
	}
	return &throttled{r: r, rate: s.cfg.ReadBytesPerSec, start: time.Now()}
}

// throttled delays reads so that n bytes take at least n/rate seconds
// from the first read.
type throttled struct {
	r     io.Reader
	rate  float64
	start time.Time
	n     int64
}

func (t *throttled) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10] // small steps: the delay tracks the bytes read
	}
	n, err := t.r.Read(p)
	t.n += int64(n)
	due := t.start.Add(time.Duration(float64(t.n) / t.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d) // the throttle itself, not a wait for a condition
	}
	return n, err
}
