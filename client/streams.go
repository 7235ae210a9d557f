package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Batch streams, the one way both engines read from a worker: open a stream
// for the job (with the job's compression and the client's receive limits
// and buffer recycling), read batches, and sort how the stream ended.

// stream is one open batch stream to a worker.
type stream struct {
	worker string
	r      *batch.Receiver
	rec    *batch.Recorder // records the buffers of each batch for Release; nil: no recycling
}

// streamRequest is what differs between the streams the engines open.
type streamRequest struct {
	Window int    // the credit granted up front
	Extra  []byte // OpenRequest.Extra: a coordinated read's round
	// Grow lets the window grow with Options.WindowBytes (plain streams; a
	// coordinated stream carries one batch).
	Grow bool
}

// openStream opens a batch stream for the iterator's job to worker at addr.
func (it *Iterator) openStream(ctx context.Context, worker, addr string, sr streamRequest) (*stream, error) {
	rec := it.c.recorder()
	req := batch.OpenRequest{Job: it.job, Consumer: it.consumer, Window: sr.Window, Extra: sr.Extra, Compression: it.comp, JobID: it.jobID, Token: it.c.opts.Token, Capability: it.capability}
	r, err := batch.OpenConfig(ctx, it.c.tr, it.c.codec, addr, req, it.c.receiverConfig(rec, sr.Grow))
	if err != nil {
		return nil, fmt.Errorf("open a stream to worker %s: %w", worker, err)
	}
	return &stream{worker: worker, r: r, rec: rec}, nil
}

// next reads the next batch; the error is the stream's end (see endingOf).
func (s *stream) next(ctx context.Context) (batch.Header, tensor.Element, error) {
	h, el, err := s.r.Next(ctx)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("worker %s closed the stream (shutting down?): %w", s.worker, err)
	}
	return h, el, err
}

// batch is the Batch for the element just read, owning the buffers it was
// read into.
func (s *stream) batch(h batch.Header, el tensor.Element, batched bool) Batch {
	return Batch{Element: el, Worker: s.worker, Seq: h.Seq, Epoch: h.Epoch, batched: batched, buf: recyclable(s.rec)}
}

// wireBytes is what the last batch took on the stream.
func (s *stream) wireBytes() int64 { return s.r.LastWireBytes() }

func (s *stream) close() { s.r.Close() }

// ending is how a stream (or an attempt to open one) ended.
type ending int

const (
	// endOfData: the worker sent its end of data (io.EOF).
	endOfData ending = iota
	// endRefused: the worker ended the stream with a message
	// (*batch.RemoteError): its pipeline failed, or (coordinated reads) it
	// says to skip the round; or it does not speak this client's protocol
	// version (batch.ErrUnsupportedVersion). Asking again gets the same
	// answer.
	endRefused
	// endPaused: the worker's process drained (a graceful shutdown) after
	// sending everything; its next process may bring more of the job.
	endPaused
	// endBroken: the stream failed on the way (the worker died or shut
	// down, a transport failure, a cancelled context): another stream may
	// succeed.
	endBroken
)

// endingOf sorts a stream's error; msg is the worker's message when it
// refused.
func endingOf(err error) (e ending, msg string) {
	var re *batch.RemoteError
	switch {
	case errors.Is(err, batch.ErrPaused):
		return endPaused, ""
	case errors.Is(err, io.EOF):
		return endOfData, ""
	case errors.Is(err, batch.ErrUnsupportedVersion):
		return endRefused, err.Error()
	case errors.As(err, &re):
		return endRefused, re.Message
	default:
		return endBroken, ""
	}
}

// workerFailed is the error that ends a job whose worker refused a stream
// with msg; cause is the stream's error. A refused protocol version stays
// visible to errors.Is (batch.ErrUnsupportedVersion): it says what to
// upgrade.
func workerFailed(job, worker, msg string, cause error) error {
	if errors.Is(cause, batch.ErrUnsupportedVersion) {
		return fmt.Errorf("job %q: worker %s: %w", job, worker, cause)
	}
	return fmt.Errorf("job %q: worker %s: %s", job, worker, msg)
}
