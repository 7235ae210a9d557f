package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/client"
)

// handles maps the integers the C API hands out to the Go objects they
// stand for. C never holds a Go pointer to an object: it holds a number,
// which a closed or released object no longer resolves (errClosed), so a
// handle used twice or after close is an error, never a crash.
// (runtime/cgo.Handle would panic on a stale handle instead.)
type handles struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]any
}

var table = &handles{m: map[uint64]any{}}

func (h *handles) put(v any) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.m[h.next] = v
	return h.next
}

func (h *handles) get(id uint64) any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[id]
}

// taken removes a handle that stands for a *T and returns it, or nil (and
// removes nothing) when the handle stands for something else: a release or
// close given another kind's handle by mistake must not unregister it.
func taken[T any](h *handles, id uint64) *T {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[id].(*T)
	if ok {
		delete(h.m, id)
	}
	return v
}

// count returns how many live handles hold a value for which is returns
// true.
func (h *handles) count(is func(any) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.m {
		if is(v) {
			n++
		}
	}
	return n
}

// typed resolves a handle to a *T, or errClosed naming what was wanted.
func typed[T any](id uint64, what string) (*T, error) {
	v, ok := table.get(id).(*T)
	if !ok {
		return nil, fmt.Errorf("%s handle %d: %w (or never opened)", what, id, errClosed)
	}
	return v, nil
}

// clientObj is a client.Client and the iterators opened through it, which
// close with it (client.Client.Close wants them closed first).
type clientObj struct {
	c *client.Client

	mu     sync.Mutex
	iters  map[*iterObj]uint64 // open iterators and their handles
	closed bool
}

// open registers an iterator of the client, unless it was closed meanwhile.
func (c *clientObj) open(it *client.Iterator) (uint64, error) {
	o := &iterObj{cl: c, it: it, start: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		it.Close()
		return 0, fmt.Errorf("client: %w", errClosed)
	}
	h := table.put(o)
	c.iters[o] = h
	return h, nil
}

// forget drops a closed iterator from the client's open ones.
func (c *clientObj) forget(o *iterObj) {
	c.mu.Lock()
	delete(c.iters, o)
	c.mu.Unlock()
}

// close closes the client's open iterators, then the client.
func (c *clientObj) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	iters := c.iters
	c.iters = nil
	c.mu.Unlock()
	var errs []error
	for o, h := range iters {
		taken[iterObj](table, h)
		if err := o.close(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.c.Close())
	return errors.Join(errs...)
}

// iterObj is a client.Iterator. client.Iterator.Next is for one goroutine
// and Checkpoint must come between two Nexts: mu serialises them, so that
// callers on several threads cannot break either rule. Close does not
// take mu: it ends a Next in progress.
type iterObj struct {
	cl     *clientObj
	it     *client.Iterator
	start  time.Time
	mu     sync.Mutex
	closed atomic.Bool
	// wait is next's context, reused while its timer has not fired.
	// Guarded by mu.
	wait *waitCtx
	// held is a batch fm_next_meta could not describe in the caller's
	// buffer (too small): the next call returns it first. Guarded by mu.
	held *client.Batch

	// The names (tensors' and workers') fm_next_meta's records refer to
	// by number: ids[name] indexes names. Guarded by nmu.
	nmu   sync.Mutex
	ids   map[string]int64
	names []string
}

// next waits up to timeout for a batch. It returns codeOK with the batch,
// codeEnd at the end of the data, codeTimeout, or an error.
func (o *iterObj) next(timeout time.Duration) (client.Batch, int, error) {
	if o.closed.Load() {
		return client.Batch{}, codeClosed, fmt.Errorf("iterator of job %q: %w", o.it.Job(), errClosed)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.held; b != nil {
		o.held = nil
		return *b, codeOK, nil
	}
	ctx := o.wait
	if ctx == nil {
		ctx = newWaitCtx()
		o.wait = ctx
	}
	ctx.arm(timeout)
	b, err := o.it.Next(ctx)
	if !ctx.timer.Stop() {
		o.wait = nil // its timer fired: its Done is closed (or about to be)
	}
	switch {
	case err == nil:
		return b, codeOK, nil
	case o.closed.Load():
		return client.Batch{}, codeClosed, fmt.Errorf("iterator of job %q: %w", o.it.Job(), errClosed)
	case errors.Is(err, io.EOF):
		return client.Batch{}, codeEnd, nil
	case err == ctx.Err():
		// Next returns our context's own error when the wait ran out; the
		// iteration's errors are others (and the iterator goes on).
		return client.Batch{}, codeTimeout, nil
	}
	return client.Batch{}, kindOf(err), err
}

// waitCtx is the context of a wait of next: Done is closed when the
// wait's timer fires. context.WithTimeout would cost a new timer and five
// allocations per batch; a waitCtx serves call after call until a wait
// runs out (most calls find a batch waiting), then the next call makes a
// new one.
type waitCtx struct {
	done     chan struct{}
	timer    *time.Timer
	deadline time.Time
}

func newWaitCtx() *waitCtx {
	done := make(chan struct{})
	t := time.AfterFunc(time.Hour, func() { close(done) })
	t.Stop()
	return &waitCtx{done: done, timer: t}
}

// arm starts the timer of a wait of timeout.
func (c *waitCtx) arm(timeout time.Duration) {
	c.deadline = time.Now().Add(timeout)
	c.timer.Reset(timeout)
}

func (c *waitCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *waitCtx) Done() <-chan struct{}       { return c.done }
func (c *waitCtx) Value(any) any               { return nil }

func (c *waitCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// hold keeps b for the next call of next, or releases it if the iterator
// closed meanwhile (false).
func (o *iterObj) hold(b client.Batch) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() {
		b.Release()
		return false
	}
	o.held = &b
	return true
}

// nameID is name's number in the iterator's table of names, added if new.
// The caller holds nmu.
func (o *iterObj) nameID(name string) int64 {
	if id, ok := o.ids[name]; ok {
		return id
	}
	if o.ids == nil {
		o.ids = map[string]int64{}
	}
	id := int64(len(o.names))
	o.ids[name] = id
	o.names = append(o.names, name)
	return id
}

// name is the name numbered id (false if there is none).
func (o *iterObj) name(id int64) (string, bool) {
	o.nmu.Lock()
	defer o.nmu.Unlock()
	if id < 0 || id >= int64(len(o.names)) {
		return "", false
	}
	return o.names[id], true
}

func (o *iterObj) checkpoint() ([]byte, error) {
	if o.closed.Load() {
		return nil, fmt.Errorf("checkpoint of job %q: iterator %w", o.it.Job(), errClosed)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.it.Checkpoint()
}

// stats is the iterator's client.Stats as JSON, with seconds since the
// iterator opened and elements (the rows, as `feedmesh read --json` calls
// them).
func (o *iterObj) stats() ([]byte, error) {
	s := o.it.Stats()
	return json.Marshal(struct {
		client.Stats
		Elements int64   `json:"elements"`
		Seconds  float64 `json:"seconds"`
		Job      string  `json:"job"`
	}{s, s.Rows, time.Since(o.start).Seconds(), o.it.Job()})
}

// close closes the iterator (detaching it from the job) once.
func (o *iterObj) close() error {
	if o.closed.Swap(true) {
		return nil
	}
	err := o.it.Close()
	// A held batch goes back to the client (a next in progress has
	// returned: Close ended it).
	o.mu.Lock()
	if b := o.held; b != nil {
		o.held = nil
		b.Release()
	}
	o.mu.Unlock()
	return err
}
