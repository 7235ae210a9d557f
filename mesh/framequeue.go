package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/transport/batch"
)

// frameQueue is the queue of encoded batches between a plain or sharing
// task's production and its consumer streams; each batch goes to exactly
// one stream. Its producers embed it for end, serve and queued.
type frameQueue struct {
	t   *task
	out chan *batch.Frame // closed when production ends; err says how
	err error             // set before out is closed
}

func newFrameQueue(t *task) frameQueue {
	return frameQueue{t: t, out: make(chan *batch.Frame, t.w.n.cfg.Worker.TaskBuffer)}
}

// offer queues f for the consumers (offer.go), blocking while the queue is
// full.
func (q *frameQueue) offer(f *batch.Frame) error {
	if err := offer(q.t, q.out, f); err != nil {
		return err
	}
	q.t.produced.Add(1)
	return nil
}

func (q *frameQueue) end(err error) {
	q.err = err
	close(q.out)
}

func (q *frameQueue) queued() int { return len(q.out) }

// serve streams the queue's batches to one consumer until production ends,
// the consumer goes away, or the node closes.
func (q *frameQueue) serve(ctx context.Context, s *batch.Sender, _ batch.OpenRequest) {
	t := q.t
	fs := make([]*batch.Frame, 0, t.w.n.cfg.Worker.SendCoalesce)
	for {
		select {
		case f, ok := <-q.out:
			if !ok {
				q.endStream(s)
				return
			}
			// Take the batches already waiting, as many as the client has
			// credit for, and write them together.
			fs = append(fs[:0], f)
			open := q.gather(&fs, min(s.Available(), t.w.n.cfg.Worker.SendCoalesce))
			_, err := s.SendAll(ctx, fs)
			clear(fs) // do not keep sent batches alive while waiting for the next
			if err != nil {
				// The consumer is gone; these batches (up to SendCoalesce,
				// the unsent ones included) are lost with it (at-most-once),
				// as tf.data service does.
				t.w.n.log.Debug("consumer stream ended", "job", t.job.Name, "err", err)
				return
			}
			if !open {
				q.endStream(s)
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// gather appends to *fs the batches waiting in the queue, without
// blocking, until *fs holds max; false once the queue is closed.
func (q *frameQueue) gather(fs *[]*batch.Frame, max int) bool {
	for len(*fs) < max {
		select {
		case f, ok := <-q.out:
			if !ok {
				return false
			}
			*fs = append(*fs, f)
		default:
			return true
		}
	}
	return true
}

// endStream ends a consumer's stream once the queue is closed and empty.
func (q *frameQueue) endStream(s *batch.Sender) {
	if q.t.ctx.Err() != nil {
		// Cancelled (node closing, job collected), not failed: no End, so
		// the client reconnects or moves on instead of failing the job
		// with "context canceled".
		return
	}
	s.End(q.err)
}
