package pipeline

import (
	"context"
	"errors"
	"io"
	"sync"
)

// The two ops that own goroutines: prefetch and parallel map. Each starts
// its goroutines when opened, is their only owner, and on close cancels
// them, waits for them, and only then closes its input (which those
// goroutines were reading).

type result struct {
	x   item
	err error
}

// prefetchIter reads its input ahead in one goroutine, holding at most
// buffer finished elements (plus the one being produced).
type prefetchIter struct {
	in     iter
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ch     chan result
	err    error
}

func newPrefetch(parent context.Context, in iter, buffer int) *prefetchIter {
	ctx, cancel := context.WithCancel(parent)
	it := &prefetchIter{in: in, ctx: ctx, cancel: cancel, ch: make(chan result, buffer)}
	it.wg.Add(1)
	go it.run()
	return it
}

func (it *prefetchIter) run() {
	defer it.wg.Done()
	for {
		x, err := it.in.next(it.ctx)
		select {
		case it.ch <- result{x, err}:
		case <-it.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (it *prefetchIter) next(ctx context.Context) (item, error) {
	if it.err != nil {
		return item{}, it.err
	}
	select {
	case r := <-it.ch:
		if r.err != nil {
			it.err = r.err
		}
		return r.x, r.err
	case <-ctx.Done():
		return item{}, ctx.Err()
	case <-it.ctx.Done():
		return item{}, it.ctx.Err()
	}
}

func (it *prefetchIter) close() {
	it.cancel()
	it.wg.Wait()
	it.in.close()
}

// parallelMapIter runs a map function on up to parallelism elements at
// once. A feeder goroutine reads the input and hands out jobs; workers run
// the function. In deterministic mode the feeder also queues each job's
// result slot in input order and Next reads the slots in that order; at
// most 2×parallelism elements are in flight. Otherwise results are read as
// they finish.
type parallelMapIter struct {
	in      iter
	m       *mapper
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	jobs    chan mapJob
	order   chan chan result // deterministic: result slots in input order
	out     chan result      // not deterministic: results as they finish
	st      *opStats
	statsOn bool
	err     error
}

type mapJob struct {
	x   item
	res chan result // deterministic mode: capacity 1, written once
}

func newParallelMap(parent context.Context, in iter, m *mapper, parallelism int, deterministic bool, st *opStats, statsOn bool) *parallelMapIter {
	ctx, cancel := context.WithCancel(parent)
	it := &parallelMapIter{in: in, m: m, ctx: ctx, cancel: cancel, st: st, statsOn: statsOn,
		jobs: make(chan mapJob, parallelism)}
	if deterministic {
		it.order = make(chan chan result, parallelism)
	} else {
		it.out = make(chan result, parallelism)
	}
	var workers sync.WaitGroup
	workers.Add(parallelism)
	for i := 0; i < parallelism; i++ {
		go func() {
			defer workers.Done()
			it.work()
		}()
	}
	it.wg.Add(2)
	go func() {
		defer it.wg.Done()
		it.feed()
	}()
	go func() {
		// Owns the workers: the out channel closes when all have stopped.
		defer it.wg.Done()
		workers.Wait()
		if it.out != nil {
			close(it.out)
		}
	}()
	return it
}

func (it *parallelMapIter) feed() {
	defer close(it.jobs)
	if it.order != nil {
		defer close(it.order)
	}
	for {
		x, err := it.in.next(it.ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			// The error takes its place in the output order.
			res := make(chan result, 1)
			res <- result{err: err}
			if it.order != nil {
				select {
				case it.order <- res:
				case <-it.ctx.Done():
				}
			} else {
				select {
				case it.out <- result{err: err}:
				case <-it.ctx.Done():
				}
			}
			return
		}
		job := mapJob{x: x}
		if it.order != nil {
			job.res = make(chan result, 1)
			select {
			case it.order <- job.res:
			case <-it.ctx.Done():
				return
			}
		}
		select {
		case it.jobs <- job:
		case <-it.ctx.Done():
			return
		}
	}
}

func (it *parallelMapIter) work() {
	for job := range it.jobs {
		var r result
		if err := it.ctx.Err(); err != nil {
			r.err = err
		} else {
			var start int64
			if it.statsOn {
				start = mono()
			}
			r.x, r.err = it.m.apply(job.x)
			if it.statsOn {
				it.st.busyNanos.Add(mono() - start)
			}
		}
		if job.res != nil {
			job.res <- r // capacity 1, never blocks
			continue
		}
		select {
		case it.out <- r:
		case <-it.ctx.Done():
		}
	}
}

func (it *parallelMapIter) next(ctx context.Context) (item, error) {
	if it.err != nil {
		return item{}, it.err
	}
	r, err := it.receive(ctx)
	if err != nil {
		if ctx.Err() == nil {
			it.err = err
		}
		return item{}, err
	}
	if r.err != nil {
		it.err = r.err
	}
	return r.x, r.err
}

func (it *parallelMapIter) receive(ctx context.Context) (result, error) {
	if it.order != nil {
		var res chan result
		select {
		case r, ok := <-it.order:
			if !ok {
				return result{}, it.endErr()
			}
			res = r
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
		select {
		case r := <-res:
			return r, nil
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-it.ctx.Done():
			return result{}, it.ctx.Err()
		}
	}
	select {
	case r, ok := <-it.out:
		if !ok {
			return result{}, it.endErr()
		}
		return r, nil
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
}

// endErr is what a closed output channel means: the end of the input, or
// the pipeline was cancelled.
func (it *parallelMapIter) endErr() error {
	if err := it.ctx.Err(); err != nil {
		return err
	}
	return io.EOF
}

func (it *parallelMapIter) close() {
	it.cancel()
	it.wg.Wait()
	it.in.close()
}
