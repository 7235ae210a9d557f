package worker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/share"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Ephemeral sharing on a worker: the shared production.
//
// Jobs with Share over the same dataset, sharding and epochs read one
// production per worker: a share.Shared of encoded frames whose produce
// function pulls the next element from ONE pipeline and encodes it once.
// Each sharing job's task (sharedReader, produce_shared.go) reads frames
// from it with its own cursor and queues them for its consumers, so the
// same *batch.Frame goes to every job's streams: no re-encoding, no copy. share.Shared decides who
// produces (the reader at the front) and who waits; a job that lags more
// than Config.ShareWindowBytes behind skips the evicted frames.
//
// OFF: the production runs the whole dataset, epoch after epoch, like an
// unshared OFF task. DYNAMIC: it leases splits under the jobs' share group
// (internal/fsm/sharegroup.go), a hidden job that holds the DYNAMIC
// bookkeeping of every sharing job of the dataset, so splits are leased
// once for all of them, by every worker from the same bookkeeping. Because
// the group is not any one job, a job leaving or being collected changes
// nothing for the others; the group goes with the last of them. When a
// worker dies, its outstanding group leases are lost for every sharing job
// at once (at-most-once, as without sharing); its windows die with it.
//
// Lifetime: the first sharing job whose task starts on the worker creates
// the production; later ones join it at the oldest batch still in the
// window. When the last of them leaves, the window is released and the
// pipeline closed. A production that ended (end of data or failure) takes
// no new jobs: a job starting after that gets a fresh production, so it
// reads the dataset instead of an empty stream.

// shareKey identifies the jobs that may share a production.
type shareKey struct {
	fingerprint string
	sharding    jobspec.Sharding
	epochs      int64
	group       string // DYNAMIC: the share group; "" for OFF
}

// sharedProd is one shared production on this worker.
type sharedProd struct {
	w      *Worker
	key    shareKey
	spec   *pipeline.Spec
	splits pipeline.SplitList
	shared *share.Shared[*batch.Frame]
	ctx    context.Context // the pipeline's: ends when the last job leaves
	cancel context.CancelFunc

	members  map[string]bool // jobs joined; guarded by w.mu
	joinable bool            // still in w.shares; guarded by w.mu

	// Production state, touched only by produce: share.Shared calls it
	// from one reader at a time.
	it       pipeline.Iterator
	epoch    int64
	provider *Leaser
	opened   bool // DYNAMIC: the one pipeline was opened
	seq      uint64

	// stats are the per-op statistics of the production's pipelines
	// (opstats.go): the tasks of the jobs that share it report them.
	stats opStatsLog
}

// joinShareLocked joins job to the production of its key, creating it if
// none is joinable. w.mu is held.
func (w *Worker) joinShareLocked(job api.JobInfo, spec *pipeline.Spec, all pipeline.SplitList) (*sharedProd, error) {
	key := shareKey{fingerprint: job.Fingerprint, sharding: job.Options.Sharding, epochs: job.Options.Epochs, group: job.ShareGroup}
	if key.sharding == jobspec.Dynamic && key.group == "" {
		return nil, fmt.Errorf("job %q shares with dynamic sharding but has no share group: is the leader older than this worker?", job.Name)
	}
	sp := w.shares[key]
	if sp == nil {
		sp = &sharedProd{w: w, key: key, spec: spec, splits: all, members: map[string]bool{}, joinable: true}
		sp.ctx, sp.cancel = context.WithCancel(w.ctx)
		cfg := share.DefaultConfig()
		cfg.WindowBytes = w.cfg.ShareWindowBytes
		sp.shared = share.NewShared(cfg, sp.produce)
		w.shares[key] = sp
		w.prods[sp] = true
		w.log.Info("shared production started", "dataset", job.Fingerprint, "sharding", key.sharding, "group", key.group)
	}
	if err := sp.shared.Join(job.Name); err != nil {
		if len(sp.members) == 0 {
			sp.detachLocked()
			delete(w.prods, sp)
			sp.cancel()
		}
		return nil, fmt.Errorf("join shared production: %w", err)
	}
	sp.members[job.Name] = true
	return sp, nil
}

// detach makes p take no new jobs (its data ended or failed).
func (p *sharedProd) detach() {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	p.detachLocked()
}

func (p *sharedProd) detachLocked() {
	if p.joinable && p.w.shares[p.key] == p {
		delete(p.w.shares, p.key)
	}
	p.joinable = false
}

// produce computes the next frame of the shared stream. Its pipeline runs
// under the production's context, not the reader's: a reader that gives
// up must not break the stream the others read (share.Shared lets another
// reader take over).
func (p *sharedProd) produce(context.Context) (*batch.Frame, error) {
	for {
		if p.it == nil {
			if err := p.open(); err != nil {
				p.detach()
				return nil, err
			}
		}
		el, err := p.it.Next(p.ctx)
		if errors.Is(err, io.EOF) {
			p.it.Close()
			p.stats.end(p.it)
			p.it = nil
			p.epoch++
			continue
		}
		if err != nil {
			p.detach()
			return nil, err
		}
		epoch := p.epoch
		if p.key.sharding == jobspec.Dynamic {
			epoch = -1 // as unshared DYNAMIC tasks: the lease knows, the frame does not
		}
		f, err := p.w.encodeBatch(batch.Header{Seq: p.seq, Worker: p.w.name, Epoch: epoch}, el)
		if err != nil {
			p.detach()
			return nil, fmt.Errorf("encode batch: %w", err)
		}
		p.seq++
		p.w.countEncoded(el)
		p.w.shareProduced.Add(1)
		return f, nil
	}
}

// open starts the pipeline of the next epoch (OFF) or the one leasing
// pipeline (DYNAMIC); io.EOF when everything has been produced.
func (p *sharedProd) open() error {
	var o pipeline.Options
	var ss []pipeline.Split
	switch p.key.sharding {
	case jobspec.Dynamic:
		if p.opened {
			p.closeProvider()
			return io.EOF
		}
		p.opened = true
		p.provider = NewLeaser(p.ctx, p.w.host, p.w.leaseConfig(p.key.group, p.splits, false))
		o.Provider = p.provider
	default:
		if p.epoch >= p.key.epochs {
			return io.EOF
		}
		ss = p.splits.All()
	}
	o.Cores = p.w.coreShare
	o.Budget = p.w.cfg.taskBudget()
	it, err := pipeline.OpenWithOptions(p.ctx, p.spec, ss, o)
	if err != nil {
		return err
	}
	p.it = it
	p.stats.begin(it)
	return nil
}

func (p *sharedProd) closeProvider() {
	if p.provider != nil {
		p.provider.Close(p.w.ctx)
		p.provider = nil
	}
}

// leave takes job out of the production; the last job out releases the
// window and stops the pipeline. No reader is inside produce then: only
// joined jobs read, and each leaves after its last Read returned.
func (p *sharedProd) leave(job string) (share.JobStats, bool) {
	w := p.w
	w.mu.Lock()
	st, ok := p.shared.JobStats(job)
	p.shared.Leave(job)
	delete(p.members, job)
	last := len(p.members) == 0
	if last {
		p.detachLocked()
		delete(w.prods, p)
	}
	w.mu.Unlock()
	if last {
		p.cancel()
		if p.it != nil {
			p.it.Close()
			p.stats.end(p.it)
			p.it = nil
		}
		p.closeProvider()
		w.log.Info("shared production released", "dataset", p.key.fingerprint, "produced", p.shared.Stats().Produced)
	}
	return st, ok
}
