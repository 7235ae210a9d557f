package share

import (
	"errors"
	"fmt"
)

// Config bounds the sharing window of one (worker, dataset). Start from
// DefaultConfig (production) or FastConfig (tests, in-process clusters) and
// change single fields; Validate reports what is wrong by field name.
type Config struct {
	// WindowBytes bounds the bytes of produced batches the window retains
	// (the sum of Item.Size over retained items). It is the memory a worker
	// spends per shared dataset, and it decides how far a slow job may lag
	// behind the fastest one before it misses batches: a job that falls more
	// than WindowBytes behind skips the evicted batches. Raise it when jobs of
	// a sweep run at uneven speeds and must not miss data; lower it on workers
	// short of memory. A single batch larger than WindowBytes cannot be shared
	// and fails the shared production with ErrItemTooLarge. The operator-facing
	// name is share.window_bytes.
	WindowBytes int64

	// MaxItems bounds the number of retained items, whatever their size, so
	// that tiny (or empty) batches cannot grow the window's index without
	// bound. The default is far above what WindowBytes allows for real
	// batches; it only matters for degenerate ones.
	MaxItems int
}

// DefaultWindowBytes is DefaultConfig's WindowBytes: 256 MiB.
const DefaultWindowBytes = 256 << 20

// DefaultMaxItems is DefaultConfig's MaxItems, also used by NewWindow.
const DefaultMaxItems = 1 << 16

// DefaultConfig returns the production settings: a 256 MiB window.
func DefaultConfig() Config {
	return Config{WindowBytes: DefaultWindowBytes, MaxItems: DefaultMaxItems}
}

// FastConfig returns settings for tests and in-process clusters, where many
// nodes share one machine: a 32 MiB window.
func FastConfig() Config {
	c := DefaultConfig()
	c.WindowBytes = 32 << 20
	return c
}

// Validate reports every invalid field, by name.
func (c Config) Validate() error {
	var errs []error
	if c.WindowBytes <= 0 {
		errs = append(errs, fmt.Errorf("share config: WindowBytes is %d, must be positive (share.window_bytes; default %d)", c.WindowBytes, int64(DefaultWindowBytes)))
	}
	if c.MaxItems <= 0 {
		errs = append(errs, fmt.Errorf("share config: MaxItems is %d, must be positive (default %d)", c.MaxItems, DefaultMaxItems))
	}
	return errors.Join(errs...)
}
