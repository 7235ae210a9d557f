package mesh

import (
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/splits"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// plainProducer is a task that runs its own pipeline over this worker's
// splits: the whole dataset every epoch (OFF), its STATIC share, or the
// splits it leases (DYNAMIC, leases.go).
type plainProducer struct {
	frameQueue
	seq uint64
}

func newPlainProducer(t *task) *plainProducer {
	return &plainProducer{frameQueue: newFrameQueue(t)}
}

// produce runs the pipeline over this worker's splits for every epoch.
func (p *plainProducer) produce() error {
	t := p.t
	o := t.job.Options
	switch o.Sharding {
	case api.Dynamic:
		exact := o.Delivery == api.ExactlyOnce
		lp := newLeaseProvider(t.ctx, t.w.n, t.job.Name, t.splits, exact)
		lp.jobID, lp.waited, lp.onRelease = t.job.ID, &t.leaseWait, t.markReleased
		lp.held = t.cacheHeld()
		defer lp.close()
		for {
			// One pipeline per phase (exactly-once: a phase ends when
			// the leases are done; a dead worker's splits start another).
			if err := p.pump(pipeline.Options{Provider: lp, Track: exact}, nil, -1, lp); err != nil || !exact {
				return err
			}
			more, err := lp.awaitMore()
			if err != nil || !more {
				return err
			}
		}
	case api.Static:
		ids := splits.StaticAssignment(t.splits.Len(), workerNames(t.job), t.w.n.name)
		mine := make([]pipeline.Split, 0, len(ids))
		for _, id := range ids {
			s, err := splitByID(t.splits, id)
			if err != nil {
				return err
			}
			mine = append(mine, s)
		}
		for e := int64(0); e < o.Epochs; e++ {
			if err := p.pump(pipeline.Options{}, mine, e, nil); err != nil {
				return err
			}
		}
		return nil
	default: // off: the whole dataset on every worker
		for e := int64(0); e < o.Epochs; e++ {
			if err := p.pumpList(pipeline.Options{}, t.splits, e, nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// pump runs one pipeline to its end, encoding each batch and offering it.
// A full queue blocks the pipeline: that is the task's back-pressure. With
// o.Track (exactly-once), each batch names its elements (Header.Prov) and
// the splits whose elements have all been offered are reported to lp.
func (p *plainProducer) pump(o pipeline.Options, ss []pipeline.Split, epoch int64, lp *leaseProvider) error {
	return p.pumpList(o, pipeline.SplitListOf(ss), epoch, lp)
}

// pumpList is pump over a SplitList (OFF: the whole dataset's, never built
// as one slice).
func (p *plainProducer) pumpList(o pipeline.Options, ss pipeline.SplitList, epoch int64, lp *leaseProvider) error {
	t := p.t
	o.Cores = t.w.coreShare
	o.Cache = t.autocache()
	it, err := pipeline.OpenList(t.ctx, t.spec, ss, o)
	if err != nil {
		return err
	}
	t.stats.begin(it)
	defer t.stats.end(it)
	defer it.Close()
	tr, _ := it.(pipeline.Tracker) // nil unless o.Track
	for {
		el, err := it.Next(t.ctx)
		if errors.Is(err, io.EOF) {
			if tr != nil && lp != nil {
				lp.produced(tr.Completed()) // splits whose last elements were dropped
			}
			return nil
		}
		if err != nil {
			return err
		}
		h := batch.Header{Seq: p.seq, Worker: t.w.n.name, Epoch: epoch}
		p.seq++
		if tr != nil {
			h.Prov = appendProvenance(h.Prov, tr)
		}
		f, err := t.w.n.encodeBatch(h, el)
		if err != nil {
			return fmt.Errorf("encode batch: %w", err)
		}
		t.w.countEncoded(el)
		if err := p.offer(f); err != nil {
			return err
		}
		if tr != nil && lp != nil {
			lp.produced(tr.Completed())
		}
	}
}

// appendProvenance appends the provenance of the element tr's pipeline
// last returned to dst (Header.Prov's form).
func appendProvenance(dst []batch.ProvRange, tr pipeline.Tracker) []batch.ProvRange {
	for _, se := range tr.LastProvenance() {
		dst = batch.AppendProv(dst, se.Epoch, se.Split, se.Indices)
	}
	return dst
}

// workerNames are the names of a job's workers, in its order (a STATIC
// job's agreed list).
func workerNames(j api.JobInfo) []string {
	out := make([]string, len(j.Workers))
	for i, w := range j.Workers {
		out[i] = w.Name
	}
	return out
}
