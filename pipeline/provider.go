package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/ranges"
)

// ProvidedSplit is one split a SplitProvider hands out.
type ProvidedSplit struct {
	Split Split
	// Epoch is the job epoch the split is read for (DYNAMIC epochs
	// overlap, so one pipeline may read splits of two epochs). It tags the
	// elements' provenance and seeds random functions exactly as a repeat
	// pass does.
	Epoch int64
	// Exclude lists element indices of the split (positions as the source
	// yields them, 0-based, before any op) that must not be yielded: they
	// were delivered before. The source still reads them (it must, to
	// count positions) but drops them before the first op, so they cost no
	// op work.
	Exclude ranges.Set
}

// SplitProvider hands a pipeline its splits one at a time, as it needs
// them: DYNAMIC sharding leases splits from the cluster this way instead of
// fixing the list up front. Next returns io.EOF when there are no more.
// A call to Next also tells the provider that the split it returned before
// has been read completely.
type SplitProvider interface {
	Next(ctx context.Context) (ProvidedSplit, error)
}

// providerIter is sourceIter's twin for a SplitProvider.
type providerIter struct {
	p       *plan
	seg     *segment // the timing segment the source runs in
	cur     formats.Iterator
	split   Split
	epoch   uint64 // the current split's
	exclude ranges.Set
	ex      int   // offset in exclude of the first interval ending after index
	index   int64 // position in the split, excluded ones counted
	trk     *splitTrack
	drained bool
}

func (s *providerIter) next(ctx context.Context) (item, error) {
	for {
		if s.cur == nil {
			if s.drained {
				return item{}, io.EOF
			}
			ps, err := s.nextSplit(ctx)
			if errors.Is(err, io.EOF) {
				// A provider is consumed once: a repeat around it sees an
				// empty second pass (the job's epochs do the repeating,
				// and a DYNAMIC job refuses a spec that repeats:
				// jobspec.RepeatError).
				s.drained = true
				return item{}, io.EOF
			}
			if err != nil {
				return item{}, fmt.Errorf("source: next split: %w", err)
			}
			if err := ps.Exclude.Validate(); err != nil {
				return item{}, fmt.Errorf("source: split %d epoch %d: exclude: %w", ps.Split.ID, ps.Epoch, err)
			}
			cur, err := s.p.open(withEpoch(s.p.ctx, ps.Epoch), ps.Split)
			if err != nil {
				return item{}, fmt.Errorf("source: split %d: %w", ps.Split.ID, err)
			}
			s.cur, s.split, s.index = cur, ps.Split, 0
			s.epoch, s.exclude, s.ex = uint64(ps.Epoch), ps.Exclude, 0
			if s.p.track != nil {
				s.trk = s.p.track.newSplit(ps.Epoch, ps.Split.ID)
			}
		}
		el, err := s.cur.Next(ctx)
		if err == nil {
			i := s.index
			s.index++
			if s.excluded(i) {
				continue
			}
			if s.trk != nil {
				s.trk.yielded++
			}
			x := item{el: el, split: s.split.ID, index: i, epoch: s.epoch}
			if s.trk != nil {
				x.prov = &s.trk.prov
			}
			return x, nil
		}
		if !errors.Is(err, io.EOF) {
			return item{}, fmt.Errorf("source: split %d: %w", s.split.ID, err)
		}
		s.cur.Close()
		s.cur = nil
		if s.trk != nil {
			s.trk.end()
			s.trk = nil
		}
	}
}

// excluded reports whether position i (ascending from one call to the
// next) is in the split's Exclude set.
// nextSplit asks the provider for the next split. With statistics on, the
// time it waits is the source's wait (its input is the provider: a
// DYNAMIC job's leases), timed exactly (once per split, not sampled), and
// taken out of the times of the stages it runs under (segment.external),
// so that waiting for splits is not counted as any op's work.
func (s *providerIter) nextSplit(ctx context.Context) (ProvidedSplit, error) {
	if !s.p.statsOn {
		return s.p.provider.Next(ctx)
	}
	t0 := mono()
	ps, err := s.p.provider.Next(ctx)
	d := mono() - t0
	s.seg.external += d
	s.p.stats[0].splitWaitNanos.Add(d)
	return ps, err
}

func (s *providerIter) excluded(i int64) bool {
	for s.ex < len(s.exclude) && s.exclude[s.ex+1] <= i {
		s.ex += 2
	}
	return s.ex < len(s.exclude) && s.exclude[s.ex] <= i
}

func (s *providerIter) close() {
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
}
