package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/pipeline/formats"
)

// SplitProvider hands a pipeline its splits one at a time, as it needs
// them: DYNAMIC sharding leases splits from the cluster this way instead of
// fixing the list up front. Next returns io.EOF when there are no more.
// A call to Next also tells the provider that the split it returned before
// has been read completely.
type SplitProvider interface {
	Next(ctx context.Context) (Split, error)
}

// providerIter is sourceIter's twin for a SplitProvider.
type providerIter struct {
	p       *plan
	epoch   uint64
	cur     formats.Iterator
	split   Split
	index   int64
	drained bool
}

func (s *providerIter) next(ctx context.Context) (item, error) {
	for {
		if s.cur == nil {
			if s.drained {
				return item{}, io.EOF
			}
			sp, err := s.p.provider.Next(ctx)
			if errors.Is(err, io.EOF) {
				// A provider is consumed once: a repeat around it sees an
				// empty second pass (the job's epochs do the repeating).
				s.drained = true
				return item{}, io.EOF
			}
			if err != nil {
				return item{}, fmt.Errorf("source: next split: %w", err)
			}
			cur, err := s.p.open(s.p.ctx, sp)
			if err != nil {
				return item{}, fmt.Errorf("source: split %d: %w", sp.ID, err)
			}
			s.cur, s.split, s.index = cur, sp, 0
		}
		el, err := s.cur.Next(ctx)
		if err == nil {
			it := item{el: el, split: s.split.ID, index: s.index, epoch: s.epoch}
			s.index++
			return it, nil
		}
		if !errors.Is(err, io.EOF) {
			return item{}, fmt.Errorf("source: split %d: %w", s.split.ID, err)
		}
		s.cur.Close()
		s.cur = nil
	}
}

func (s *providerIter) close() {
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
}
