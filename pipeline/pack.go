package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/feedmesh/feedmesh/tensor"
)

// Packing turns documents (variable-length token sequences) into rows of
// exactly Length tokens, as language-model pretraining loaders and Grain's
// packing do. Each row carries, besides the tokens, document_ids (1, 2, …
// per document piece in the row, 0 on padding) and positions (0, 1, … within
// each piece, 0 on padding), so attention can be masked per document.
//
// Provenance: a document leaves the pipeline with the row that holds its
// last token (an empty document with the next row). So under exactly-once
// delivery a document cut across rows counts as delivered when its last
// row is, and re-reading its split after a failure may deliver its earlier
// pieces again, never lose them.

// Pack strategies and bounds.
const (
	PackConcat   = "concat"
	PackFirstFit = "first_fit"
	// DefaultPackOpenBins is first_fit's max_open_bins when unset.
	DefaultPackOpenBins = 8
	// MaxPackOpenBins bounds max_open_bins.
	MaxPackOpenBins = 4096
	// MaxPackLength bounds a row's length in tokens.
	MaxPackLength = 1 << 22
	// PackDocumentIDs and PackPositions name the tensors pack adds.
	PackDocumentIDs = "document_ids"
	PackPositions   = "positions"
)

func validatePack(p *PackOp, at string, add func(path, format string, args ...any)) {
	if p.Tensor == "" {
		add(at+".tensor", "missing: name the token tensor to pack (e.g. tokens)")
	} else if p.Tensor == PackDocumentIDs || p.Tensor == PackPositions {
		add(at+".tensor", "%q is a tensor pack writes; name the token tensor", p.Tensor)
	}
	if p.Length <= 0 || p.Length > MaxPackLength {
		add(at+".length", "must be in [1, %d], got %d", MaxPackLength, p.Length)
	}
	switch p.Strategy {
	case PackConcat:
		if p.MaxOpenBins != 0 {
			add(at+".max_open_bins", "only with strategy first_fit (concat keeps one row open)")
		}
	case PackFirstFit:
		if p.MaxOpenBins < 1 || p.MaxOpenBins > MaxPackOpenBins {
			add(at+".max_open_bins", "must be in [1, %d], got %d", MaxPackOpenBins, p.MaxOpenBins)
		}
	default:
		add(at+".strategy", "unknown strategy %q (known: %s, %s)", p.Strategy, PackConcat, PackFirstFit)
	}
}

// packRow is a row being filled.
type packRow struct {
	tokens    []int64
	docs      []int32
	pos       []int32
	nextDoc   int32
	head      item   // the document that gave the row its first token
	completed []item // documents whose last token is in the row
}

func (r *packRow) free(length int) int { return length - len(r.tokens) }

// place appends one piece of document d.
func (r *packRow) place(d item, piece []int64) {
	if len(r.tokens) == 0 {
		r.head = d
	}
	r.nextDoc++
	for i, t := range piece {
		r.tokens = append(r.tokens, t)
		r.docs = append(r.docs, r.nextDoc)
		r.pos = append(r.pos, int32(i))
	}
}

// packer is the packing logic, with no I/O: documents in, finished rows
// out (in ready), bounded by one row (concat) or maxOpen rows (first_fit)
// plus the rows one document fills.
type packer struct {
	length   int
	firstFit bool
	maxOpen  int
	open     []*packRow // concat: at most one
	ready    []*packRow
	orphans  []item // empty documents, waiting for the next row
}

// add packs one document (its tokens, EOS included).
func (p *packer) add(d item, toks []int64) {
	if len(toks) == 0 {
		p.orphans = append(p.orphans, d)
		return
	}
	if !p.firstFit {
		for off := 0; off < len(toks); {
			if len(p.open) == 0 {
				p.open = append(p.open, &packRow{})
			}
			r := p.open[0]
			n := min(len(toks)-off, r.free(p.length))
			r.place(d, toks[off:off+n])
			off += n
			if off == len(toks) {
				r.completed = append(r.completed, d)
			}
			if r.free(p.length) == 0 {
				p.finish(0)
			}
		}
		return
	}
	// first_fit: what is longer than a row fills rows of its own first;
	// the rest goes into the first open row with room.
	for len(toks) > p.length {
		r := &packRow{}
		r.place(d, toks[:p.length])
		p.finishRow(r)
		toks = toks[p.length:]
	}
	at := -1
	for i, r := range p.open {
		if r.free(p.length) >= len(toks) {
			at = i
			break
		}
	}
	if at < 0 {
		if len(p.open) == p.maxOpen {
			p.finish(p.fullest())
		}
		p.open = append(p.open, &packRow{})
		at = len(p.open) - 1
	}
	r := p.open[at]
	r.place(d, toks)
	r.completed = append(r.completed, d)
	if r.free(p.length) == 0 {
		p.finish(at)
	}
}

// fullest is the open row with the least room (the oldest among equals).
func (p *packer) fullest() int {
	best := 0
	for i, r := range p.open {
		if r.free(p.length) < p.open[best].free(p.length) {
			best = i
		}
	}
	return best
}

// finish moves open row i to ready.
func (p *packer) finish(i int) {
	r := p.open[i]
	p.open = append(p.open[:i], p.open[i+1:]...)
	p.finishRow(r)
}

func (p *packer) finishRow(r *packRow) {
	r.completed = append(r.completed, p.orphans...)
	p.orphans = p.orphans[:0]
	p.ready = append(p.ready, r)
}

// flush finishes every open row, oldest first, and returns the empty
// documents no row will carry.
func (p *packer) flush() []item {
	for len(p.open) > 0 {
		p.finish(0)
	}
	left := p.orphans
	p.orphans = nil
	return left
}

// packIter is the pack op.
type packIter struct {
	in    iter
	o     *PackOp
	p     packer
	st    *opStats
	name  string
	dtype tensor.DType
	toks  []int64
	eof   bool
	acct  *account // the rows' tokens (nil: not counted)
}

// packTokenBytes is what a packed token costs a row: its id (int64),
// document id and position (int32 each).
const packTokenBytes = 16

func newPackIter(in iter, o *PackOp, st *opStats, name string) *packIter {
	return &packIter{in: in, o: o, st: st, name: name,
		p: packer{length: int(o.Length), firstFit: o.Strategy == PackFirstFit, maxOpen: int(o.MaxOpenBins)}}
}

func (it *packIter) next(ctx context.Context) (item, error) {
	for len(it.p.ready) == 0 {
		if it.eof {
			return item{}, io.EOF
		}
		x, err := it.in.next(ctx)
		if errors.Is(err, io.EOF) {
			it.eof = true
			for _, d := range it.p.flush() {
				dropItem(&d)
			}
			continue
		}
		if err != nil {
			return item{}, err
		}
		if err := it.document(x); err != nil {
			return item{}, err
		}
		it.p.add(x, it.toks)
		if err := it.acct.charge(packTokenBytes * int64(len(it.toks))); err != nil {
			return item{}, err
		}
	}
	r := it.p.ready[0]
	it.p.ready[0] = nil
	it.p.ready = it.p.ready[1:]
	it.acct.credit(packTokenBytes * int64(len(r.tokens)))
	return it.row(r)
}

// document reads x's tokens (and the EOS) into it.toks.
func (it *packIter) document(x item) error {
	t, ok := x.el.Get(it.o.Tensor)
	if !ok {
		return fmt.Errorf("%s: split %d element %d has no tensor %q", it.name, x.split, x.index, it.o.Tensor)
	}
	if len(t.Shape) != 1 || (t.DType != tensor.Int32 && t.DType != tensor.Int64) {
		return fmt.Errorf("%s: split %d element %d: tensor %q is %s%v; want int32 or int64 [n]", it.name, x.split, x.index, it.o.Tensor, t.DType, t.Shape)
	}
	if it.dtype == 0 {
		it.dtype = t.DType
		if it.dtype == tensor.Int32 {
			for _, v := range []struct {
				name string
				v    *int64
			}{{"eos", it.o.EOS}, {"pad_value", &it.o.PadValue}} {
				if v.v != nil && (*v.v < math.MinInt32 || *v.v > math.MaxInt32) {
					return fmt.Errorf("%s.%s: %d does not fit the int32 tensor %q", it.name, v.name, *v.v, it.o.Tensor)
				}
			}
		}
	} else if t.DType != it.dtype {
		return fmt.Errorf("%s: split %d element %d: tensor %q is %s, earlier documents were %s", it.name, x.split, x.index, it.o.Tensor, t.DType, it.dtype)
	}
	it.toks = it.toks[:0]
	if t.DType == tensor.Int32 {
		v, err := t.Int32s()
		if err != nil {
			return fmt.Errorf("%s: split %d element %d: %w", it.name, x.split, x.index, err)
		}
		for _, id := range v {
			it.toks = append(it.toks, int64(id))
		}
	} else {
		v, err := t.Int64s()
		if err != nil {
			return fmt.Errorf("%s: split %d element %d: %w", it.name, x.split, x.index, err)
		}
		it.toks = append(it.toks, v...)
	}
	if it.o.EOS != nil {
		it.toks = append(it.toks, *it.o.EOS)
	}
	return nil
}

// row builds the output element of a finished row, padded to Length.
func (it *packIter) row(r *packRow) (item, error) {
	n := int(it.o.Length)
	used := len(r.tokens)
	if it.st != nil {
		it.st.packTokens.Add(int64(used))
		it.st.packPadding.Add(int64(n - used))
	}
	docs := make([]int32, n)
	pos := make([]int32, n)
	copy(docs, r.docs)
	copy(pos, r.pos)
	shape := []int64{int64(n)}
	var tok tensor.Tensor
	var err error
	if it.dtype == tensor.Int32 {
		v := make([]int32, n)
		for i := range v {
			if i < used {
				v[i] = int32(r.tokens[i])
			} else {
				v[i] = int32(it.o.PadValue)
			}
		}
		tok, err = tensor.FromInt32s(it.o.Tensor, shape, v)
	} else {
		v := make([]int64, n)
		copy(v, r.tokens)
		for i := used; i < n; i++ {
			v[i] = it.o.PadValue
		}
		tok, err = tensor.FromInt64s(it.o.Tensor, shape, v)
	}
	if err != nil {
		return item{}, fmt.Errorf("%s: %w", it.name, err)
	}
	d, err := tensor.FromInt32s(PackDocumentIDs, shape, docs)
	if err != nil {
		return item{}, fmt.Errorf("%s: %w", it.name, err)
	}
	p, err := tensor.FromInt32s(PackPositions, shape, pos)
	if err != nil {
		return item{}, fmt.Errorf("%s: %w", it.name, err)
	}
	out := r.head
	out.el = tensor.Element{Tensors: []tensor.Tensor{tok, d, p}}
	if r.head.prov != nil {
		if len(r.completed) > 0 {
			out.prov = batchProv(r.completed)
		} else {
			// Only pieces of documents that end in later rows: this row
			// accounts for no source element.
			out.prov = &prov{trk: r.head.prov.trk, members: []member{}}
		}
	}
	return out, nil
}

func (it *packIter) close() {
	it.in.close()
	it.acct.release()
}
