package worker

import (
	"context"
	"sync"

	"github.com/feedmesh/feedmesh/transport/batch"
)

// frameQueue is the queue of encoded batches between a plain or sharing
// task's production and its consumer streams; each batch goes to exactly
// one stream. Its producers embed it for end, serve and queued.
//
// Exactly-once jobs (resend): a batch sent on a stream that then fails
// may not have reached the consumer, and nothing else would ever send its
// elements again while this worker lives. So a failed stream's batches
// not yet credited back (at most its window), and those it did not get to
// send, are sent first on that consumer's next stream; the consumer drops
// those it did receive as duplicates (client/receipts.go). They go to the
// same consumer, never another: the consumer may have received them, and
// credits lag (a quarter window at a time), so another consumer could get
// an element twice. If the consumer never comes back (it left, or
// crashed), the cluster counts what it did not receipt as abandoned
// (splits.DynamicState.Depart); the frames of a consumer that detached are
// dropped at the next requeue.
type frameQueue struct {
	t   *task
	out chan *batch.Frame // closed when production ends; err and paused say how
	err error             // set before out is closed
	// paused: production ended because the node drains (drain.go), and
	// the job's next process on this node takes over: streams end with
	// EndPaused, not a plain end of data. Set before out is closed.
	paused bool

	resend bool // exactly-once: resend what a failed stream may not have delivered
	mu     sync.Mutex
	again  map[string][]*batch.Frame // consumer → to send first on its next stream; at most streams × (window + SendCoalesce)
	kick   chan struct{}             // capacity 1: again got frames
}

func newFrameQueue(t *task) frameQueue {
	return frameQueue{t: t, out: make(chan *batch.Frame, t.w.cfg.TaskBuffer),
		resend: t.job.Tracks(), kick: make(chan struct{}, 1)}
}

// requeue puts frames back for consumer's next stream to send, and drops
// those of consumers that have detached from the job.
func (q *frameQueue) requeue(consumer string, fs []*batch.Frame) {
	if len(fs) == 0 {
		return
	}
	var detached map[string]int64
	if v, ok := q.t.w.host.LocalJob(q.t.job.Name); ok && v.ID == q.t.job.ID {
		detached = v.Detached
	}
	q.mu.Lock()
	if q.again == nil {
		q.again = map[string][]*batch.Frame{}
	}
	q.again[consumer] = append(q.again[consumer], fs...)
	for c := range q.again {
		if _, gone := detached[c]; gone {
			delete(q.again, c)
		}
	}
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// takeAgain appends to *fs, up to max, frames to send consumer again.
func (q *frameQueue) takeAgain(consumer string, fs *[]*batch.Frame, max int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	again := q.again[consumer]
	k := min(max-len(*fs), len(again))
	if k <= 0 {
		return
	}
	*fs = append(*fs, again[:k]...)
	clear(again[:k])
	if again = again[k:]; len(again) == 0 {
		delete(q.again, consumer)
	} else {
		q.again[consumer] = again
	}
}

func (q *frameQueue) hasAgain(consumer string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.again[consumer]) > 0
}

// offer queues f for the consumers (offer.go), blocking while the queue is
// full.
func (q *frameQueue) offer(f *batch.Frame) error {
	size := f.Size()
	if err := offer(q.t, q.out, f); err != nil {
		return err
	}
	q.t.produced.Add(1)
	q.t.producedBytes.Add(size)
	return nil
}

func (q *frameQueue) end(err error) {
	q.err = err
	q.paused = err == nil && (q.t.w.draining() || q.t.dismissed.Load()) && !q.t.job.Options.Share
	close(q.out)
}

func (q *frameQueue) queued() int { return len(q.out) }

// serve streams the queue's batches to one consumer until production ends,
// the consumer goes away, or the node closes.
func (q *frameQueue) serve(ctx context.Context, s *batch.Sender, req batch.OpenRequest) {
	me := req.Consumer
	t := q.t
	coalesce := t.w.cfg.SendCoalesce
	fs := make([]*batch.Frame, 0, coalesce)
	var sent []*batch.Frame // exactly-once: sent, maybe not yet credited back
	for {
		fs = fs[:0]
		open := true
		if q.resend {
			q.takeAgain(me, &fs, min(max(s.Available(), 1), coalesce))
		}
		if len(fs) == 0 {
			select {
			case f, ok := <-q.out:
				if !ok {
					if q.resend && q.hasAgain(me) {
						continue
					}
					q.endStream(s)
					return
				}
				fs = append(fs, f)
			case <-q.kick:
				continue
			case <-s.Gone():
				// The consumer left while this stream had nothing to
				// send: what it had not credited back waits for its
				// next stream.
				if q.resend {
					q.requeue(me, uncredited(sent, s.Outstanding()))
				}
				return
			case <-ctx.Done():
				return
			}
		}
		// Take the batches already waiting, as many as the client has
		// credit for, and write them together.
		open = q.gather(&fs, min(s.Available(), coalesce))
		n, err := s.SendAll(ctx, fs)
		if q.resend {
			sent = uncredited(append(sent, fs[:n]...), s.Outstanding())
			if err != nil {
				q.requeue(me, append(sent, fs[n:]...))
				sent = nil
			}
		}
		clear(fs) // do not keep sent batches alive while waiting for the next
		if err != nil {
			// The consumer is gone. At-most-once: these batches (up to
			// SendCoalesce, the unsent ones included) are lost with it,
			// as tf.data service does; exactly-once: requeued above.
			t.w.log.Debug("consumer stream ended", "job", t.job.Name, "err", err)
			return
		}
		if !open && !(q.resend && q.hasAgain(me)) {
			q.endStream(s)
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
	if q.paused {
		s.EndPaused()
		return
	}
	s.End(q.err)
}

// uncredited keeps the last k frames of sent, the ones the client has not
// credited back (credits come back in order); the others were delivered.
func uncredited(sent []*batch.Frame, k int) []*batch.Frame {
	if len(sent) <= k {
		return sent
	}
	d := len(sent) - k
	clear(sent[:d])
	return append(sent[:0], sent[d:]...)
}
