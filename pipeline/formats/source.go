package formats

import (
	"context"

	"github.com/feedmesh/feedmesh/tensor"
)

// Split is a unit of source data handed to one worker: a file, a byte or
// record range of a file, or an index range. Splits are enumerated in a
// deterministic order and ID is the position in that enumeration, so the
// same spec enumerates the same splits on every node.
type Split struct {
	ID int64 `cbor:"1,keyasint" json:"id"`
	// Path is the file the split reads ("" for range and synthetic sources).
	Path string `cbor:"2,keyasint,omitempty" json:"path,omitempty"`
	// Start and End delimit the split: an index range [Start, End) for range
	// and synthetic sources, a byte range [Start, End) within Path for
	// files (End == -1 means to the end of the file).
	Start int64 `cbor:"3,keyasint" json:"start"`
	End   int64 `cbor:"4,keyasint" json:"end"`
}

// Iterator yields elements. Next returns io.EOF at the end; after Close the
// iterator must not be used. Close waits for every goroutine it started.
type Iterator interface {
	Next(ctx context.Context) (tensor.Element, error)
	Close() error
}
