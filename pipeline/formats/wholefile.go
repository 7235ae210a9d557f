package formats

import (
	"context"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/tensor"
)

// wholeFileIter reads a whole_file split: one element, the file's bytes
// and its path.
type wholeFileIter struct {
	fr   *fileRange
	max  int64
	done bool
}

func newWholeFileIter(fr *fileRange, o FilesOptions) (Iterator, error) {
	return &wholeFileIter{fr: fr, max: o.MaxRecordBytes}, nil
}

func (it *wholeFileIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.done {
		return tensor.Element{}, io.EOF
	}
	it.done = true
	if it.fr.size > it.max {
		return tensor.Element{}, &RecordError{Path: it.fr.path, Offset: -1, Err: ErrRecordTooLarge,
			Msg: fmt.Sprintf("file of %d bytes exceeds max_record_bytes (%d)", it.fr.size, it.max)}
	}
	data := make([]byte, it.fr.size)
	if _, err := io.ReadFull(io.NewSectionReader(it.fr.f, 0, it.fr.size), data); err != nil {
		return tensor.Element{}, fmt.Errorf("read %s: %w", it.fr.path, err)
	}
	return tensor.Element{Tensors: []tensor.Tensor{
		tensor.BytesScalar("data", data),
		tensor.BytesScalar("path", []byte(it.fr.path)),
	}}, nil
}

func (it *wholeFileIter) Close() error { return it.fr.f.Close() }
