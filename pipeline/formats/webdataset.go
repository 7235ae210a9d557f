package formats

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/feedmesh/feedmesh/tensor"
)

// WebDataset shards are tar files whose members sharing a key (the member
// path up to the first dot of its base name) form one sample:
// "train/000123.jpg" and "train/000123.cls" become one element with the
// bytes scalars "jpg" and "cls" (the rest of the name after that dot, so
// "000123.seg.png" gives "seg.png") and "__key__" ("train/000123").
// Members of a sample are consecutive in the tar, as WebDataset writers
// put them. A shard is read front to back through archive/tar, never
// seeking, so it can come from a stream. Each shard is one split.
//
// Members that are not regular files (directories, links) and files whose
// base name has no dot or starts with one are skipped, as WebDataset's
// loader does.

// WebDatasetKey is the tensor holding a sample's key.
const WebDatasetKey = "__key__"

// tarBlock is the tar format's block size: headers and data are padded to it.
const tarBlock = 512

// countingReader counts the bytes read through it: the offset in the
// shard that errors name.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type webDatasetIter struct {
	path    string
	f       io.Closer
	cr      *countingReader
	tr      *tar.Reader
	skip    bool
	max     int64
	skipped int64
	done    bool

	// pending is a header read ahead: the first member of the next sample.
	pending *wdsMember
	// headerAt is where the next header starts (the end of the previous
	// member's data, rounded up to a block).
	headerAt int64
}

type wdsMember struct {
	name, key, ext string
	size           int64
	data           []byte
	offset         int64 // of its header
}

func newWebDatasetIter(fr *fileRange, o FilesOptions) (Iterator, error) {
	cr := &countingReader{r: bufio.NewReaderSize(io.NewSectionReader(fr.f, 0, fr.size), readBufferBytes)}
	return &webDatasetIter{
		path: fr.path,
		f:    fr.f,
		cr:   cr,
		tr:   tar.NewReader(cr),
		skip: o.SkipCorrupt,
		max:  o.MaxRecordBytes,
	}, nil
}

// Skipped counts samples dropped by skip_corrupt: the one a corrupt or
// truncated shard ended in (counted even when it had no member yet).
func (it *webDatasetIter) Skipped() int64 { return it.skipped }

func (it *webDatasetIter) recErr(off int64, sentinel error, format string, args ...any) error {
	return &RecordError{Path: it.path, Offset: off, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

func (it *webDatasetIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.done {
		return tensor.Element{}, io.EOF
	}
	el, err := it.sample(ctx)
	if err == nil || errors.Is(err, io.EOF) {
		return el, err
	}
	it.done = true
	if it.skip && (errors.Is(err, ErrTruncatedRecord) || errors.Is(err, ErrCorruptRecord)) {
		it.skipped++
		return tensor.Element{}, io.EOF
	}
	return tensor.Element{}, err
}

// sample reads the members of the next key. It reads a member's header
// before its data, so a sample is complete, and returned, before the next
// one is read: a shard broken inside a sample loses that sample only.
func (it *webDatasetIter) sample(ctx context.Context) (tensor.Element, error) {
	var ms []*wdsMember
	var size int64
	for {
		if err := ctx.Err(); err != nil {
			return tensor.Element{}, err
		}
		h, err := it.header()
		if errors.Is(err, io.EOF) {
			it.done = true
			if len(ms) == 0 {
				return tensor.Element{}, io.EOF
			}
			return it.element(ms)
		}
		if err != nil {
			return tensor.Element{}, err
		}
		if len(ms) > 0 && h.key != ms[0].key {
			it.pending = h
			return it.element(ms)
		}
		for _, o := range ms {
			if o.ext == h.ext {
				return tensor.Element{}, it.recErr(h.offset, ErrBadRecord, "sample %q has two members with extension %q", h.key, h.ext)
			}
		}
		size += h.size
		if size > it.max {
			return tensor.Element{}, it.recErr(h.offset, ErrRecordTooLarge, "sample %q: %d bytes exceed max_record_bytes (%d)", h.key, size, it.max)
		}
		h.data = make([]byte, h.size)
		if _, err := io.ReadFull(it.tr, h.data); err != nil {
			return tensor.Element{}, it.tarErr(h.offset, fmt.Sprintf("member %q (%d bytes)", h.name, h.size), err)
		}
		it.headerAt = roundBlock(it.cr.n)
		ms = append(ms, h)
	}
}

// header returns the header of the next regular file with a key (its data
// still to read), or io.EOF after the end-of-archive marker.
func (it *webDatasetIter) header() (*wdsMember, error) {
	if h := it.pending; h != nil {
		it.pending = nil
		return h, nil
	}
	for {
		at := it.headerAt
		h, err := it.tr.Next()
		if errors.Is(err, io.EOF) {
			// archive/tar says io.EOF both at the end-of-archive marker (two
			// zero blocks) and when the file simply stops at a member
			// boundary: only the first is a whole shard.
			if it.cr.n < at+2*tarBlock {
				return nil, it.recErr(it.cr.n, ErrTruncatedRecord, "truncated tar: the shard ends without its end-of-archive marker (cut at a member boundary?)")
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, it.tarErr(at, "header", err)
		}
		key, ext, ok := splitKey(h.Name)
		if ok && (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeCont) {
			if h.Size > it.max {
				return nil, it.recErr(at, ErrRecordTooLarge, "member %q of %d bytes exceeds max_record_bytes (%d)", h.Name, h.Size, it.max)
			}
			return &wdsMember{name: h.Name, key: key, ext: ext, size: h.Size, offset: at}, nil
		}
		// Skipped: not a file, or no key.
		if _, err := io.Copy(io.Discard, it.tr); err != nil {
			return nil, it.tarErr(at, fmt.Sprintf("member %q", h.Name), err)
		}
		it.headerAt = roundBlock(it.cr.n)
	}
}

// tarErr turns archive/tar's errors into ones naming the file and offset.
func (it *webDatasetIter) tarErr(at int64, what string, err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return it.recErr(at, ErrTruncatedRecord, "truncated tar: %s at offset %d is cut short (the file ends at %d)", what, at, it.cr.n)
	}
	// archive/tar's parse failures (tar.ErrHeader, bad numbers or PAX
	// records, a checksum mismatch) all mean a corrupt header.
	return it.recErr(at, ErrCorruptRecord, "corrupt tar %s: %v", what, err)
}

func roundBlock(n int64) int64 { return (n + tarBlock - 1) / tarBlock * tarBlock }

// splitKey cuts a member name into WebDataset's key and extension.
func splitKey(name string) (key, ext string, ok bool) {
	dir, base := path.Split(name)
	i := strings.IndexByte(base, '.')
	if i <= 0 || i == len(base)-1 {
		return "", "", false
	}
	return dir + base[:i], base[i+1:], true
}

// element makes a sample's tensors, sorted by name after the key.
func (it *webDatasetIter) element(ms []*wdsMember) (tensor.Element, error) {
	sort.Slice(ms, func(a, b int) bool { return ms[a].ext < ms[b].ext })
	ts := make([]tensor.Tensor, 0, len(ms)+1)
	ts = append(ts, tensor.BytesScalar(WebDatasetKey, []byte(ms[0].key)))
	for _, m := range ms {
		if m.ext == WebDatasetKey {
			return tensor.Element{}, it.recErr(m.offset, ErrBadRecord, "member extension %q is reserved", m.ext)
		}
		ts = append(ts, tensor.BytesScalar(m.ext, m.data))
	}
	return tensor.Element{Tensors: ts}, nil
}

func (it *webDatasetIter) Close() error { return it.f.Close() }
