package worker

import (
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/internal/share"
)

// sharedReader is a task of a job with Share: it reads the job's frames
// from the shared production of its dataset on this worker (sharedprod.go)
// with the job's own cursor, and queues them for the job's consumers.
type sharedReader struct {
	frameQueue
	prod *sharedProd

	// final keeps the job's counters once it has left the production
	// (left); both guarded by w.mu.
	final share.JobStats
	left  bool
}

// newSharedReader joins the task's job to its shared production. w.mu is
// held.
func newSharedReader(t *task) (*sharedReader, error) {
	sp, err := t.w.joinShareLocked(t.job, t.spec, t.splits)
	if err != nil {
		return nil, err
	}
	return &sharedReader{frameQueue: newFrameQueue(t), prod: sp}, nil
}

// produce reads the job's next frame from the shared production and
// offers it to the job's consumers. A full queue blocks only this job: the
// production goes on for the others, and this job skips what is evicted
// meanwhile.
func (r *sharedReader) produce() error {
	t := r.t
	defer func() {
		st, _ := r.prod.leave(t.job.Name)
		t.w.mu.Lock()
		r.final, r.left = st, true
		t.w.mu.Unlock()
	}()
	for {
		f, err := r.prod.shared.Read(t.ctx, t.job.Name)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, share.ErrItemTooLarge) {
			return fmt.Errorf("%w (this worker's Worker.ShareWindowBytes is %d bytes; raise it, or make the batches smaller)", err, t.w.cfg.ShareWindowBytes)
		}
		if err != nil {
			return err
		}
		if err := r.offer(f); err != nil {
			return err
		}
	}
}

// stats returns the job's sharing counters and its window's. w.mu is held.
func (r *sharedReader) statsLocked() (share.JobStats, share.WindowStats) {
	if r.left {
		return r.final, share.WindowStats{Produced: r.prod.shared.Stats().Produced}
	}
	st, _ := r.prod.shared.JobStats(r.t.job.Name)
	return st, r.prod.shared.Stats()
}
