package pipeline

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
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
	acct   *account // the elements in ch (nil: not counted)
}

func newPrefetch(parent context.Context, in iter, buffer int) *prefetchIter {
	return newPrefetchBudget(parent, in, buffer, nil)
}

func newPrefetchBudget(parent context.Context, in iter, buffer int, acct *account) *prefetchIter {
	ctx, cancel := context.WithCancel(parent)
	it := &prefetchIter{in: in, ctx: ctx, cancel: cancel, ch: make(chan result, buffer), acct: acct}
	it.wg.Add(1)
	go it.run()
	return it
}

func (it *prefetchIter) run() {
	defer it.wg.Done()
	for {
		x, err := it.in.next(it.ctx)
		if err == nil {
			if err = it.acct.chargeItem(&x); err != nil {
				it.acct.creditItem(&x)
				x = item{}
			}
		}
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
		} else {
			it.acct.creditItemRemote(&r.x) // the run goroutine owns acct
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
	it.acct.release()
}

// parallelMapIter runs a map function on up to parallelism elements at
// once. A feeder goroutine reads the input and hands out jobs; workers run
// the function. A job is a chunk of consecutive elements: one element when
// the function is expensive, more (up to maxChunk) when it is so cheap that
// handing each element to a goroutine and back would cost more than the
// work (chunks aim at chunkTargetNanos of work). In deterministic mode the
// feeder also queues each job's result slot in input order and Next reads
// the slots in that order; otherwise results are read as they finish.
// At most 2×parallelism jobs are in flight.
type parallelMapIter struct {
	in      iter
	m       *mapper
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	jobs    chan mapJob
	order   chan chan []result // deterministic: result slots in input order
	out     chan []result      // not deterministic: results as they finish
	st      *opStats
	statsOn bool
	// gate (tuned maps) bounds the workers that run at once; stopWake
	// unregisters its wake-up on ctx.
	gate     *gate
	stopWake func() bool

	// Work measured by the workers, to size chunks.
	workNanos, workElems atomic.Int64

	cur []result // results being handed out by next
	err error
}

const (
	maxChunk         = 64
	chunkTargetNanos = 50_000
)

type mapJob struct {
	xs  []item
	res chan []result // deterministic mode: capacity 1, written once
}

func newParallelMap(parent context.Context, in iter, m *mapper, parallelism int, deterministic bool, st *opStats, statsOn bool, g *gate) *parallelMapIter {
	ctx, cancel := context.WithCancel(parent)
	it := &parallelMapIter{in: in, m: m, ctx: ctx, cancel: cancel, st: st, statsOn: statsOn,
		jobs: make(chan mapJob, parallelism), gate: g}
	if g != nil {
		it.stopWake = context.AfterFunc(ctx, g.wake)
	}
	if deterministic {
		it.order = make(chan chan []result, parallelism)
	} else {
		it.out = make(chan []result, parallelism)
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

// chunkSize is how many elements the next job gets.
func (it *parallelMapIter) chunkSize() int {
	n, ns := it.workElems.Load(), it.workNanos.Load()
	if n < 8 {
		return 1 // no measurement yet
	}
	per := max(ns/n, 1)
	return int(min(max(chunkTargetNanos/per, 1), maxChunk))
}

func (it *parallelMapIter) feed() {
	defer close(it.jobs)
	if it.order != nil {
		defer close(it.order)
	}
	for {
		size := it.chunkSize()
		xs := make([]item, 0, size)
		var err error
		for len(xs) < size {
			var x item
			if x, err = it.in.next(it.ctx); err != nil {
				break
			}
			xs = append(xs, x)
		}
		if len(xs) > 0 && !it.dispatch(mapJob{xs: xs}) {
			return
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			// The error takes its place in the output order.
			res := make(chan []result, 1)
			res <- []result{{err: err}}
			if it.order != nil {
				select {
				case it.order <- res:
				case <-it.ctx.Done():
				}
			} else {
				select {
				case it.out <- []result{{err: err}}:
				case <-it.ctx.Done():
				}
			}
		}
		return
	}
}

// dispatch queues a job (and, in deterministic mode, its result slot); it
// returns false when the pipeline is closing.
func (it *parallelMapIter) dispatch(job mapJob) bool {
	if it.order != nil {
		job.res = make(chan []result, 1)
		select {
		case it.order <- job.res:
		case <-it.ctx.Done():
			return false
		}
	}
	select {
	case it.jobs <- job:
		return true
	case <-it.ctx.Done():
		return false
	}
}

func (it *parallelMapIter) work() {
	if it.gate != nil {
		for it.gate.acquire(it.ctx) {
			job, ok := <-it.jobs
			if ok {
				it.do(job)
			}
			it.gate.release()
			if !ok {
				return
			}
		}
		return
	}
	for job := range it.jobs {
		it.do(job)
	}
}

// do runs one job and hands out its results.
func (it *parallelMapIter) do(job mapJob) {
	rs := make([]result, 0, len(job.xs))
	if err := it.ctx.Err(); err != nil {
		rs = append(rs, result{err: err})
	} else {
		start := mono()
		for _, x := range job.xs {
			y, err := it.m.apply(x)
			rs = append(rs, result{y, err})
			if err != nil {
				break // the error ends the iteration
			}
		}
		d := mono() - start
		it.workNanos.Add(d)
		it.workElems.Add(int64(len(rs)))
		if it.statsOn {
			it.st.busyNanos.Add(d)
		}
	}
	if job.res != nil {
		job.res <- rs // capacity 1, never blocks
		return
	}
	select {
	case it.out <- rs:
	case <-it.ctx.Done():
	}
}

func (it *parallelMapIter) next(ctx context.Context) (item, error) {
	if it.err != nil {
		return item{}, it.err
	}
	for len(it.cur) == 0 {
		rs, err := it.receive(ctx)
		if err != nil {
			it.err = err
			return item{}, err
		}
		it.cur = rs
	}
	r := it.cur[0]
	it.cur[0] = result{}
	it.cur = it.cur[1:]
	if r.err != nil {
		it.err = r.err
	}
	return r.x, r.err
}

func (it *parallelMapIter) receive(ctx context.Context) ([]result, error) {
	if it.order != nil {
		var res chan []result
		select {
		case r, ok := <-it.order:
			if !ok {
				return nil, it.endErr()
			}
			res = r
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case r := <-res:
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-it.ctx.Done():
			return nil, it.ctx.Err()
		}
	}
	select {
	case r, ok := <-it.out:
		if !ok {
			return nil, it.endErr()
		}
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
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
	if it.stopWake != nil {
		it.stopWake()
	}
	it.in.close()
}
