package worker

import (
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// plainProducer is a task that runs its own pipeline over this worker's
// splits: the whole dataset every epoch (OFF), its STATIC share, or the
// splits it leases (DYNAMIC, leases.go).
type plainProducer struct {
	frameQueue
	seq uint64
	// spec is the pipeline the task runs now: t.spec, or its prefix once
	// the job is cut while it runs (setCut); cut is its cut (0: none),
	// and cutExtra the Header.Extra (api.CutHeader) marking its elements.
	spec     *pipeline.Spec
	cut      int
	cutExtra []byte
}

func newPlainProducer(t *task) *plainProducer {
	p := &plainProducer{frameQueue: newFrameQueue(t), spec: t.spec}
	if cut := t.job.Options.OffloadBoundary; cut > 0 {
		p.cut = cut // t.spec is the prefix already (newTaskLocked)
		p.cutExtra, _ = cbor.Marshal(api.CutHeader{Cut: cut})
	}
	return p
}

// setCut makes the next pipeline run the ops before cut (a job cut while
// it runs: OffloadRequest.Cut). A job is cut once: a task that runs a cut
// already never takes another.
func (p *plainProducer) setCut(cut int) error {
	if cut == p.cut {
		return nil
	}
	if p.cut != 0 {
		return fmt.Errorf("job %q: a lease cut after %d ops, and this task runs the cut after %d (a job is cut once)", p.t.job.Name, cut, p.cut)
	}
	if err := p.t.spec.CheckCut(cut); err != nil {
		return fmt.Errorf("job %q: %w", p.t.job.Name, err)
	}
	extra, err := cbor.Marshal(api.CutHeader{Cut: cut})
	if err != nil {
		return err
	}
	p.spec, p.cut, p.cutExtra = p.t.spec.Prefix(cut), cut, extra
	p.t.w.log.Info("job cut while it runs: this node now runs the ops before the cut and ships single elements", "job", p.t.job.Name, "cut", cut)
	return nil
}

// produce runs the pipeline over this worker's splits for every epoch.
func (p *plainProducer) produce() error {
	t := p.t
	o := t.job.Options
	switch o.Sharding {
	case jobspec.Dynamic:
		exact := t.job.Tracks()
		cfg := t.w.leaseConfig(t.job.Name, t.splits, exact)
		cfg.JobID, cfg.Waited, cfg.OnDismiss = t.job.ID, &t.leaseWait, t.markDismissed
		cfg.Held = t.w.host.CacheHeld(t.job, t.spec)
		cfg.Cut = p.cut
		if t.job.Options.Delivery == jobspec.ExactlyOnce {
			cfg.JobCut = func() int { return t.w.host.JobCut(t.job.Name, t.job.ID) }
		}
		lp := NewLeaser(t.ctx, t.w.host, cfg)
		defer lp.Close(t.w.ctx)
		for {
			// One pipeline per phase (exactly-once: a phase ends when
			// the leases are done; a dead worker's splits start another;
			// a split leased after the job was cut starts one that runs
			// the prefix; at-most-once with a count, a census of a dead
			// worker's splits runs in a phase of its own).
			if err := p.setCut(lp.NextCut()); err != nil {
				return err
			}
			census := lp.NextCensus()
			lp.StartPhase(p.cut, census)
			if census {
				t.w.log.Info("at-most-once: counting what dead workers' splits lose (a census: run, not delivered)", "job", t.job.Name, "splits", lp.QueuedCensus())
			}
			if err := p.pump(pipeline.Options{Provider: lp, Track: exact}, nil, -1, lp); err != nil {
				return err
			}
			if lp.TakeRecut() {
				continue
			}
			if !exact {
				return nil
			}
			more, err := lp.AwaitMore(t.ctx)
			if err != nil || !more {
				return err
			}
		}
	case jobspec.Static:
		ids := splits.StaticAssignment(t.splits.Len(), workerNames(t.job), t.w.name)
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
func (p *plainProducer) pump(o pipeline.Options, ss []pipeline.Split, epoch int64, lp *Leaser) error {
	return p.pumpList(o, pipeline.SplitListOf(ss), epoch, lp)
}

// pumpList is pump over a SplitList (OFF: the whole dataset's, never built
// as one slice).
func (p *plainProducer) pumpList(o pipeline.Options, ss pipeline.SplitList, epoch int64, lp *Leaser) error {
	t := p.t
	o.Cores = t.w.coreShare
	o.Cache = t.w.host.TaskCache(t.ctx, t.job, t.spec)
	o.Budget = t.w.cfg.taskBudget()
	it, err := pipeline.OpenList(t.ctx, p.spec, ss, o)
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
				lp.Produced(tr.Completed()) // splits whose last elements were dropped
			}
			return nil
		}
		if err != nil {
			return err
		}
		if lp != nil && lp.Census() {
			// A census delivers nothing: it counts what the splits
			// emit (reported as produced, counted lost).
			if tr != nil {
				lp.Produced(tr.Completed())
			}
			continue
		}
		h := batch.Header{Seq: p.seq, Worker: t.w.name, Epoch: epoch, Extra: p.cutExtra}
		p.seq++
		if tr != nil {
			h.Prov = appendProvenance(h.Prov, tr)
		}
		f, err := t.w.encodeBatch(h, el)
		if err != nil {
			return fmt.Errorf("encode batch: %w", err)
		}
		t.w.countEncoded(el)
		if err := p.offer(f); err != nil {
			return err
		}
		if tr != nil && lp != nil {
			lp.Produced(tr.Completed())
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
