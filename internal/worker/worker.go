package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Worker runs a node's tasks, one per job it works for, and serves their
// batches on the node's data streams.
type Worker struct {
	host           Host
	name           string
	incarnation    uint64
	cfg            Config
	requestTimeout time.Duration
	failover       time.Duration
	codec          *transport.Codec
	log            *slog.Logger
	access         *objstore.Access // the node's data-access policy
	accessFor      func(tenant string) *objstore.Access
	// ctx ends when the worker closes: every task's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	tasks  map[string]*task
	shares map[shareKey]*sharedProd // productions new sharing jobs join
	prods  map[*sharedProd]bool     // every live production, joinable or not

	// drainCh is closed when a graceful shutdown starts to drain the
	// worker (drain.go).
	drainCh   chan struct{}
	drainOnce sync.Once

	// Counters of the batches this worker encoded, over all tasks and
	// shared productions: the preprocessing work it did.
	encodedBatches, encodedRows atomic.Int64
	shareProduced               atomic.Int64
}

// New is the worker of the node host; Serve starts it, Close stops it.
func New(host Host, o Options) *Worker {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{host: host, name: o.Name, incarnation: o.Incarnation, cfg: o.Config, requestTimeout: o.RequestTimeout,
		failover: o.Failover, codec: o.Codec, log: log, access: o.Access, accessFor: o.AccessFor,
		tasks: map[string]*task{}, shares: map[shareKey]*sharedProd{}, prods: map[*sharedProd]bool{}, drainCh: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

// Serve accepts data streams on l until it closes, in a goroutine that
// Close waits for.
func (w *Worker) Serve(l net.Listener) {
	w.wg.Add(1)
	go w.serve(l)
}

func (w *Worker) serve(l net.Listener) {
	defer w.wg.Done()
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		w.wg.Add(1)
		go w.handleStream(conn)
	}
}

func (w *Worker) handleStream(conn net.Conn) {
	defer w.wg.Done()
	ctx := w.ctx
	// The task is looked up (and started) before the client is told the
	// compression in force: the job's options decide it, not the client.
	var (
		t    *task
		terr error
	)
	sender, req, err := batch.AcceptWith(ctx, w.codec, conn, w.cfg.MaxWindow, func(req batch.OpenRequest) batch.Compression {
		if w.cfg.Disabled {
			return batch.CompressNone
		}
		job, err := w.host.StreamJob(conn, req)
		if err != nil {
			terr = err
			return batch.CompressNone
		}
		if t, terr = w.task(ctx, job, req.JobID); terr != nil {
			return batch.CompressNone
		}
		return t.compression()
	})
	if err != nil {
		if errors.Is(err, batch.ErrUnsupportedVersion) {
			// A client of another release: its user needs to know.
			w.log.Warn("data stream refused: the client speaks another batch protocol version", "err", err)
		} else {
			w.log.Debug("data stream rejected", "err", err)
		}
		conn.Close()
		return
	}
	defer sender.Close()
	if w.cfg.Disabled {
		sender.End(fmt.Errorf("node %s does not run tasks (worker disabled)", w.name))
		return
	}
	if err := terr; err != nil {
		if ctx.Err() != nil || w.draining() {
			// The node is closing: not the job's failure. Close the
			// stream without an error so the consumer retries elsewhere.
			return
		}
		sender.End(w.host.StreamError(conn, req.Token, err))
		return
	}
	if err := w.host.MayRead(ctx, conn, req, t.job); err != nil {
		w.log.Warn("data stream refused: permission denied", "job", t.job.Name, "err", err)
		sender.End(w.host.StreamError(conn, req.Token, err))
		return
	}
	req.Job = t.job.Name // the name the worker knows it by
	t.streams.Add(1)
	defer t.streams.Add(-1)
	t.prod.serve(ctx, sender, req)
	if w.draining() {
		// The consumer reads the end after the batches before it: the
		// node must not close the connection before it has (drain.go).
		select {
		case <-sender.Gone():
		case <-ctx.Done():
		}
	}
}

// task returns the running task for job, starting it on first use. id,
// when not 0, is the job's ID as the consumer knows it: a task of an
// older job of that name (replaced by a resume) is stopped and the new
// one started; a consumer of an older job than the task's is refused.
func (w *Worker) task(ctx context.Context, job string, id uint64) (*task, error) {
	w.mu.Lock()
	t := w.tasks[job]
	if t != nil && t.retired.Load() {
		delete(w.tasks, job) // dismissed and drained: the job took the worker back
		t = nil
	}
	if t != nil && id != 0 && t.job.ID < id {
		w.log.Info("task stopped: its job was replaced under the same name", "job", job, "id", t.job.ID, "new_id", id)
		t.cancel()
		delete(w.tasks, job)
		t = nil
	}
	w.mu.Unlock()
	if t != nil {
		if id != 0 && t.job.ID != id {
			return nil, fmt.Errorf("worker %s: job %q is id %d now, not %d (it was replaced: a resume)", w.name, job, t.job.ID, id)
		}
		return t, nil
	}
	rctx, cancel := context.WithTimeout(ctx, w.requestTimeout)
	resp, err := w.host.JobGet(rctx, job)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("worker %s could not load job %q (is the control plane reachable, does the job exist?): %w", w.name, job, err)
	}
	if err := api.CheckJobInfo(resp.Job); err != nil {
		return nil, fmt.Errorf("worker %s loading job %q: %w", w.name, job, err)
	}
	if id != 0 && resp.Job.ID != id {
		return nil, fmt.Errorf("worker %s: job %q is id %d, not %d (it was replaced: a resume)", w.name, job, resp.Job.ID, id)
	}
	spec, err := pipeline.DecodeCanonical(resp.Spec)
	if err != nil {
		return nil, fmt.Errorf("dataset spec: %w", err)
	}
	access := w.access
	if w.accessFor != nil {
		access = w.accessFor(resp.Job.Tenant) // the node's, narrowed to the tenant's grants
	}
	spec = spec.Bind(access) // every file it lists and opens, through the node's policy
	all, err := pipeline.ListSplits(spec)
	if err != nil {
		return nil, fmt.Errorf("enumerate splits: %w", err)
	}
	// The leader counted the dataset's splits when it registered it; a
	// worker that lists another number sees other files (objects added
	// or removed under a glob since): its split ids would name other
	// data than its peers', so it refuses rather than read the wrong rows.
	if n := resp.Job.NumSplits; n > 0 && int64(all.Len()) != n {
		return nil, fmt.Errorf("job %q: the dataset had %d splits when it was registered, this worker lists %d: files or objects its paths match were added or removed since (a dataset's files must not change; to read the new ones, change the spec, which makes a new dataset)", job, n, all.Len())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.tasks[job]; t != nil && !t.retired.Load() {
		return t, nil
	}
	if w.ctx.Err() != nil || w.draining() {
		return nil, errors.New("worker is shutting down")
	}
	t, err = w.newTaskLocked(resp.Job, spec, all)
	if err != nil {
		return nil, err
	}
	w.tasks[job] = t
	w.wg.Add(1)
	go t.run()
	w.log.Info("task started", "job", job, "sharding", resp.Job.Options.Sharding, "splits", all.Len())
	return t, nil
}

func (w *Worker) remove(t *task) {
	w.mu.Lock()
	if w.tasks[t.job.Name] == t {
		delete(w.tasks, t.job.Name)
	}
	w.mu.Unlock()
}

// Close stops every task and waits for them and the stream handlers (the
// node closes the listeners first).
func (w *Worker) Close() {
	w.cancel()
	w.mu.Lock()
	for _, t := range w.tasks {
		t.cancel()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// encodeBatch encodes one batch for the wire, unpadded and narrowed unless
// configured otherwise.
func (w *Worker) encodeBatch(h batch.Header, el tensor.Element) (*batch.Frame, error) {
	o := batch.ShippedEncodeOptions
	if w.cfg.SendPadded {
		o = batch.EncodeOptions{}
	}
	return batch.EncodeWith(w.codec, h, el, o)
}
