package worker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// roundProducer is the task of a coordinated job: it runs the pipeline
// over DYNAMIC leases (leases.go), groups its batches into round windows
// (roundwindows.go) and offers them to its roundServer (roundserver.go),
// which answers each consumer's per-round request on its own stream.
type roundProducer struct {
	t       *task
	rs      *roundServer
	grouper *windowGrouper
}

func newRoundProducer(t *task) (*roundProducer, error) {
	op, err := CoordinatedOp(t.spec)
	if err != nil {
		return nil, err
	}
	m := t.job.Options.NumConsumers
	if m < 1 {
		return nil, fmt.Errorf("coordinated: num_consumers %d: must be >= 1", m)
	}
	// Exactly-once pads the final partial windows: dropping them would
	// lose their elements.
	pad := t.job.Options.PadFinalRound || t.job.Options.Delivery == jobspec.ExactlyOnce
	g, err := newWindowGrouper(m, op, pad)
	if err != nil {
		return nil, err
	}
	cfg := t.w.cfg
	rs := newRoundServer(m, cfg.roundsAhead(), cfg.roundsHeld())
	rs.keep = t.job.Options.Delivery == jobspec.ExactlyOnce
	return &roundProducer{t: t, rs: rs, grouper: g}, nil
}

// produce runs the pipeline over DYNAMIC leases, groups its batches into
// windows and offers them; at the end it flushes the partial windows
// (padded or dropped as the job says; an exactly-once job always pads:
// dropping would lose their elements).
//
// Exactly-once (splits/exactly.go), as a plain DYNAMIC task: each batch
// names its elements (coordBatch.prov → Header.Prov), the splits whose
// elements have all been emitted are reported, and once the leases are
// done the task waits for a dead worker's splits (read again, without
// what was delivered, in the next phase) until every split is produced.
// Meanwhile it has flushed its partial windows and is idle: a round that
// asks it for a window then is served to no consumer (api.RoundIdle), or the
// consumers would wait on it while the workers still producing wait on
// the consumers.
func (p *roundProducer) produce() error {
	t := p.t
	exact := t.job.Options.Delivery == jobspec.ExactlyOnce
	cfg := t.w.leaseConfig(t.job.Name, t.splits, exact)
	cfg.Drain = nil // a coordinated task does not drain: its rounds are fixed per worker
	cfg.JobID, cfg.Waited = t.job.ID, &t.leaseWait
	lp := NewLeaser(t.ctx, t.w.host, cfg)
	defer lp.Close(t.w.ctx)
	for {
		if err := p.phase(lp, exact); err != nil {
			return err
		}
		if err := p.flush(); err != nil || !exact {
			return err
		}
		p.rs.setIdle(true)
		more, err := lp.AwaitMore(t.ctx)
		p.rs.setIdle(false)
		if err != nil || !more {
			return err
		}
	}
}

// phase runs one pipeline over the leases until they are done.
func (p *roundProducer) phase(lp *Leaser, exact bool) error {
	t := p.t
	it, err := pipeline.OpenWithOptions(t.ctx, t.spec, nil, pipeline.Options{Provider: lp, Track: exact, Cores: t.w.coreShare, Budget: t.w.cfg.taskBudget()})
	if err != nil {
		return err
	}
	t.stats.begin(it)
	defer t.stats.end(it)
	defer it.Close()
	tr, _ := it.(pipeline.Tracker) // nil unless exact
	for {
		el, err := it.Next(t.ctx)
		if errors.Is(err, io.EOF) {
			if tr != nil {
				lp.Produced(tr.Completed()) // splits whose last elements were dropped
			}
			return nil
		}
		if err != nil {
			return err
		}
		var prov []batch.ProvRange
		if tr != nil {
			prov = appendProvenance(nil, tr)
		}
		w, ok, err := p.grouper.add(el, prov)
		if err != nil {
			return err
		}
		t.w.countEncoded(el)
		if ok {
			if err := p.offer(w); err != nil {
				return err
			}
		}
		if tr != nil {
			// Emitted into a window: the split's receipts come once its
			// consumers take their batches.
			lp.Produced(tr.Completed())
		}
	}
}

// flush offers the partial windows at the end of data.
func (p *roundProducer) flush() error {
	for _, w := range p.grouper.flush() {
		if err := p.offer(w); err != nil {
			return err
		}
	}
	return nil
}

// offer queues a window for the next round fixed (offer.go).
func (p *roundProducer) offer(w bucketing.Window[coordBatch]) error {
	if err := offer(p.t, p.rs.windows, w); err != nil {
		return err
	}
	p.t.produced.Add(int64(len(w.Batches)))
	return nil
}

func (p *roundProducer) end(err error) { p.rs.end(err) }

// queued counts the batches of the windows ready for rounds not yet fixed.
func (p *roundProducer) queued() int { return len(p.rs.windows) * p.rs.m }

// serve answers one coordinated request on its own stream: one batch
// then the end, a clean end (end of data), or an end that says skip.
func (p *roundProducer) serve(ctx context.Context, s *batch.Sender, open batch.OpenRequest) {
	t, extra := p.t, open.Extra
	var req api.RoundRequest
	if len(extra) == 0 || cbor.Unmarshal(extra, &req) != nil || req.Round < 0 {
		s.End(errors.New("coordinated: the request must carry a round and a consumer index"))
		return
	}
	a := p.rs.take(ctx, req.Round, req.Index, open.Consumer)
	switch {
	case a.err != nil && (ctx.Err() != nil || t.ctx.Err() != nil):
		// The node is closing: not the job's failure. The stream just
		// closes; the consumer retries, and skips the round once this
		// worker is expired.
		return
	case a.err != nil:
		s.End(a.err)
		return
	case a.end:
		s.End(nil)
		return
	case a.idle:
		s.End(fmt.Errorf("%s: round %d, index %d", api.RoundIdle, req.Round, req.Index))
		return
	case a.skip:
		s.End(fmt.Errorf("%s: round %d, index %d", api.RoundSkipped, req.Round, req.Index))
		return
	}
	rh := api.RoundHeader{Round: req.Round, Index: req.Index, Bucket: a.bucket, PaddedTokens: a.padded, Tokens: a.b.tokens, Filler: a.b.filler}
	raw, err := cbor.Marshal(rh)
	if err != nil {
		s.End(err)
		return
	}
	h := batch.Header{Seq: uint64(req.Round), Worker: t.w.name, Extra: raw, Prov: a.b.prov}
	f, err := t.w.encodeBatch(h, a.b.el)
	if err != nil {
		s.End(fmt.Errorf("encode batch: %w", err))
		return
	}
	if err := s.Send(ctx, f); err != nil {
		t.w.log.Debug("coordinated consumer stream ended", "job", t.job.Name, "round", req.Round, "err", err)
		return
	}
	s.End(nil)
}
