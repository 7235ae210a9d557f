package share

import (
	"errors"
	"fmt"
	"slices"
)

// Item is what the window caches: an encoded batch (transport/batch.Frame)
// in production. Its size counts against the window's byte bound, so Size
// must not change while the item is retained.
type Item interface {
	// Size is the item's memory footprint in bytes; it must not be negative.
	Size() int64
}

// Errors callers branch on; returned errors wrap them with context.
var (
	// ErrUnknownJob: the job has not joined the window (or has left it).
	ErrUnknownJob = errors.New("job has not joined the share window")
	// ErrJobExists: Join was called twice for the same job.
	ErrJobExists = errors.New("job already joined the share window")
	// ErrItemTooLarge: one item is larger than the whole window, so it could
	// never be retained; the fix is a larger share.window_bytes.
	ErrItemTooLarge = errors.New("item is larger than the share window")
	// ErrNoDemand: Push was called although no job is at the front of the
	// window, i.e. nobody asked for a new item. Producing ahead of demand
	// would break the rule that production follows the fastest job.
	ErrNoDemand = errors.New("no job is waiting at the front of the share window")
	// ErrBadItem: the item reported a negative size.
	ErrBadItem = errors.New("item has a negative size")
)

// WindowStats describes a window. Positions are absolute sequence numbers
// (0 = the first item ever produced).
type WindowStats struct {
	Produced int64 // items pushed since the window was created (= End)
	Evicted  int64 // items evicted by the byte or item bound
	Released int64 // items dropped because the last job left
	Bytes    int64 // bytes of the retained items
	MaxBytes int64 // the byte bound
	Len      int   // retained items
	Start    int64 // position of the oldest retained item
	End      int64 // position the next produced item will get
	Jobs     int   // joined jobs
}

// JobStats are one job's counters in a window.
type JobStats struct {
	// Hits counts items read from the window that another job's read had
	// produced.
	Hits int64
	// Produced counts reads that caused production: the job was at the front,
	// was told to produce (Next reported ok=false) and read what was pushed.
	Produced int64
	// EvictedBeforeRead counts items evicted before this job read them: the
	// items the job skipped because it lagged more than the window behind.
	EvictedBeforeRead int64
	// Read is Hits + Produced.
	Read int64
	// Position is the absolute position of the job's next item.
	Position int64
}

// cursor is one job's read position and counters.
type cursor struct {
	job   string
	pos   int64
	asked bool // the last Next reported ok=false: the job must produce
	stats JobStats
}

// Window is the pure sharing mechanism of one (worker, dataset): the items
// produced for all jobs that share the dataset, in production order, bounded
// in bytes (and in count), with one read cursor per job. It has no
// goroutines, clocks or locks; Shared wraps it for concurrent use. The zero
// Window is not usable: create one with NewWindow or NewWindowConfig.
type Window[T Item] struct {
	maxBytes int64
	maxItems int

	items ring[T]
	start int64 // position of items.at(0)
	bytes int64

	cursors map[string]*cursor
	order   []*cursor // the same cursors, for cheap iteration

	evicted, released int64
}

// NewWindow returns an empty window that retains at most maxBytes bytes of
// items (and DefaultMaxItems items). A maxBytes below 1 is taken as 1, so
// only empty items fit; use NewWindowConfig to have bad bounds reported.
func NewWindow[T Item](maxBytes int64) *Window[T] {
	return newWindow[T](max(maxBytes, 1), DefaultMaxItems)
}

// NewWindowConfig returns an empty window bounded by cfg, or cfg's
// validation error.
func NewWindowConfig[T Item](cfg Config) (*Window[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newWindow[T](cfg.WindowBytes, cfg.MaxItems), nil
}

func newWindow[T Item](maxBytes int64, maxItems int) *Window[T] {
	return &Window[T]{maxBytes: maxBytes, maxItems: maxItems, cursors: make(map[string]*cursor)}
}

// end is the position the next pushed item gets.
func (w *Window[T]) end() int64 { return w.start + int64(w.items.len()) }

// Join adds a cursor for job at the window start (the oldest retained item),
// so a late job first reads what is still cached. Joining twice is an error
// (ErrJobExists).
func (w *Window[T]) Join(job string) error {
	if _, ok := w.cursors[job]; ok {
		return fmt.Errorf("join %q: %w", job, ErrJobExists)
	}
	c := &cursor{job: job, pos: w.start}
	c.stats.Position = c.pos
	w.cursors[job] = c
	w.order = append(w.order, c)
	return nil
}

// Leave drops job's cursor (unknown jobs are ignored). When the last job
// leaves, every retained item is released: Len and Bytes become 0, while
// positions keep counting, so a job joining later starts at the front.
func (w *Window[T]) Leave(job string) {
	c, ok := w.cursors[job]
	if !ok {
		return
	}
	delete(w.cursors, job)
	i := slices.Index(w.order, c)
	last := len(w.order) - 1
	w.order[i] = w.order[last]
	w.order[last] = nil
	w.order = w.order[:last]
	if len(w.order) == 0 {
		w.released += int64(w.items.len())
		w.start = w.end()
		w.bytes = 0
		w.items.reset()
		w.order = nil
	}
}

// Next returns job's next item in production order. If the job's cursor is
// below the window start (the items it had not read were evicted), the cursor
// first skips to the start and missed says how many items the job lost. If
// the job has read everything retained, ok is false and the caller must
// produce: Push the new item, then call Next again, which returns it (and
// counts it as Produced for this job). err wraps ErrUnknownJob for a job that
// has not joined.
func (w *Window[T]) Next(job string) (item T, ok bool, missed int64, err error) {
	c, found := w.cursors[job]
	if !found {
		return item, false, 0, fmt.Errorf("next item for %q: %w", job, ErrUnknownJob)
	}
	item, ok, missed = w.read(c, c.asked)
	c.asked = !ok
	return item, ok, missed, nil
}

// read advances c past evicted items and, if an item is retained at its
// position, returns it, counting it as Produced or as a hit.
func (w *Window[T]) read(c *cursor, produced bool) (item T, ok bool, missed int64) {
	if c.pos < w.start {
		missed = w.start - c.pos
		c.pos = w.start
		c.stats.EvictedBeforeRead += missed
	}
	if c.pos < w.end() {
		item, ok = w.items.at(int(c.pos-w.start)), true
		c.pos++
		c.stats.Read++
		if produced {
			c.stats.Produced++
		} else {
			c.stats.Hits++
		}
	}
	c.stats.Position = c.pos
	return item, ok, missed
}

// available reports whether c can read an item without production.
func (w *Window[T]) available(c *cursor) bool { return max(c.pos, w.start) < w.end() }

// demand reports whether some job is at the front (has read everything
// retained), which is what allows a Push.
func (w *Window[T]) demand() bool {
	for _, c := range w.order {
		if !w.available(c) {
			return true
		}
	}
	return false
}

// Push appends a newly produced item and evicts the oldest items while the
// window is over its byte (or item) bound, returning how many it evicted.
// Nothing changes on error: an item larger than the window (ErrItemTooLarge),
// a negative size (ErrBadItem), or no job at the front to have asked for the
// item (ErrNoDemand).
func (w *Window[T]) Push(item T) (evicted int, err error) {
	size := item.Size()
	switch {
	case size < 0:
		return 0, fmt.Errorf("push item %d: %w (%d bytes)", w.end(), ErrBadItem, size)
	case size > w.maxBytes:
		return 0, fmt.Errorf("push item %d: %w: it is %d bytes, the window holds %d; raise share.window_bytes (Config.WindowBytes) above the largest batch",
			w.end(), ErrItemTooLarge, size, w.maxBytes)
	case !w.demand():
		return 0, fmt.Errorf("push item %d: %w", w.end(), ErrNoDemand)
	}
	w.items.push(item, size)
	w.bytes += size
	for w.bytes > w.maxBytes || w.items.len() > w.maxItems {
		w.bytes -= w.items.pop()
		w.start++
		evicted++
	}
	w.evicted += int64(evicted)
	return evicted, nil
}

// Stats returns the window's counters and bounds.
func (w *Window[T]) Stats() WindowStats {
	return WindowStats{
		Produced: w.end(),
		Evicted:  w.evicted,
		Released: w.released,
		Bytes:    w.bytes,
		MaxBytes: w.maxBytes,
		Len:      w.items.len(),
		Start:    w.start,
		End:      w.end(),
		Jobs:     len(w.order),
	}
}

// JobStats returns job's counters, or false for a job that has not joined.
func (w *Window[T]) JobStats(job string) (JobStats, bool) {
	c, ok := w.cursors[job]
	if !ok {
		return JobStats{}, false
	}
	return c.stats, true
}

// Jobs returns the joined jobs, sorted.
func (w *Window[T]) Jobs() []string {
	jobs := make([]string, 0, len(w.order))
	for _, c := range w.order {
		jobs = append(jobs, c.job)
	}
	slices.Sort(jobs)
	return jobs
}

// Len is the number of retained items.
func (w *Window[T]) Len() int { return w.items.len() }

// Bytes is the total size of the retained items; it never exceeds the bound.
func (w *Window[T]) Bytes() int64 { return w.bytes }
