package pipeline

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/feedmesh/feedmesh/tensor"
)

// Memory budgets. A spec bounds counts (a shuffle's buffer, a batch's
// size), not bytes: 10,000 elements of 1 KiB or of 1 MiB. Every buffering
// op (shuffle, batch, padded_batch, bucket_by_sequence_length, pack,
// prefetch) therefore charges the bytes of the elements it holds to the
// pipeline's MemoryBudget when it takes them and credits them when it
// lets them go; the charge that takes the pipeline over its limit fails
// the pipeline with a *BudgetError naming the op. The count is of tensor
// payload bytes (ElementBytes), not of the Go heap: what an element holds
// beyond its buffers (headers, provenance) is small and left out.

// ErrMemoryBudget is what a pipeline over its memory budget fails with
// (errors.Is); the error itself is a *BudgetError.
var ErrMemoryBudget = errors.New("over the memory budget")

// BudgetError says which op took a pipeline over its memory budget.
type BudgetError struct {
	Op    string // e.g. "ops[2].shuffle"
	Held  int64  // what the op holds, the failing charge included
	Total int64  // what the pipeline's ops hold together
	Limit int64
	// Flag names the setting that sets Limit ("" for none), for the
	// message: the node's --task-memory-budget.
	Flag string
}

func (e *BudgetError) Error() string {
	f := formatBytes
	if formatBytes(e.Total) == formatBytes(e.Limit) {
		// Just over: in bytes, or the message would read "32 MiB, over
		// the budget of 32 MiB".
		f = func(n int64) string { return fmt.Sprintf("%d B", n) }
	}
	s := fmt.Sprintf("%s: holds %s", e.Op, f(e.Held))
	if e.Total != e.Held {
		s += fmt.Sprintf(" (the task's ops %s)", f(e.Total))
	}
	s += fmt.Sprintf(", over the task's memory budget of %s", f(e.Limit))
	if e.Flag != "" {
		s += " (" + e.Flag + ")"
	}
	return s
}

func (e *BudgetError) Unwrap() error { return ErrMemoryBudget }

// MemoryBudget counts the bytes a pipeline's ops hold against a limit. It
// is safe for concurrent use (ops run on several goroutines). A
// nil *MemoryBudget counts nothing and never fails.
//
// Ops do not update the shared count per element: each reserves from it
// in grains (limit/64, at most 1 MiB) as what it holds grows, and gives
// grains back as it shrinks (hysteresis: two grains), so the count is
// touched about once per grain of elements, not twice per element. The
// count, and so the point where the budget fails, is over what the ops
// hold by less than two grains per op.
type MemoryBudget struct {
	limit int64
	grain int64
	flag  string
	used  atomic.Int64 // the ops' reservations
	peak  atomic.Int64
}

// maxBudgetGrain bounds a budget's grain.
const maxBudgetGrain = 1 << 20

// NewMemoryBudget returns a budget of limit bytes (> 0); flag names the
// setting it comes from in errors ("" for none).
func NewMemoryBudget(limit int64, flag string) *MemoryBudget {
	if limit <= 0 {
		return nil
	}
	return &MemoryBudget{limit: limit, flag: flag, grain: max(1, min(maxBudgetGrain, limit/64))}
}

// Limit is the budget's limit (0 for a nil budget: none).
func (b *MemoryBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used is what the ops have reserved now (what they hold, rounded up to
// grains).
func (b *MemoryBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Peak is the most the ops reserved at once.
func (b *MemoryBudget) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// account is one op's share of a budget, used from the op's goroutine:
// charge, credit and release are not safe for concurrent use. An op that
// lets elements go on another goroutine (prefetch: its consumer) credits
// them with creditRemote, applied at its next charge or release. A nil
// account counts nothing.
type account struct {
	b        *MemoryBudget
	op       string
	held     int64        // what the op holds
	reserved int64        // its share of b.used, in grains
	remote   atomic.Int64 // credits from another goroutine, not yet applied
}

func (b *MemoryBudget) account(op string) *account {
	if b == nil {
		return nil
	}
	return &account{b: b, op: op}
}

// charge counts n more bytes held by the op. Over the limit, it returns
// a *BudgetError, and the bytes stay counted (the op holds them: release
// or credit gives them back).
func (a *account) charge(n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	if a.remote.Load() != 0 {
		a.credit(a.remote.Swap(0))
	}
	a.held += n
	if a.held <= a.reserved {
		return nil
	}
	g := a.b.grain
	want := (a.held + g - 1) / g * g
	total := a.b.used.Add(want - a.reserved)
	a.reserved = want
	for {
		p := a.b.peak.Load()
		if total <= p || a.b.peak.CompareAndSwap(p, total) {
			break
		}
	}
	if total > a.b.limit {
		return &BudgetError{Op: a.op, Held: a.held, Total: total, Limit: a.b.limit, Flag: a.b.flag}
	}
	return nil
}

// credit counts n bytes the op no longer holds (at most what it holds).
func (a *account) credit(n int64) {
	if a == nil || n <= 0 {
		return
	}
	a.held -= min(n, a.held)
	if g := a.b.grain; a.reserved-a.held >= 2*g || (a.held == 0 && a.reserved > 0) {
		want := (a.held + g - 1) / g * g
		a.b.used.Add(want - a.reserved)
		a.reserved = want
	}
}

// creditRemote is credit from another goroutine than the op's.
func (a *account) creditRemote(n int64) {
	if a == nil || n <= 0 {
		return
	}
	a.remote.Add(n)
}

// release credits everything the op holds (when it closes; from the op's
// goroutine, or after it has ended).
func (a *account) release() {
	if a == nil {
		return
	}
	a.remote.Store(0)
	a.credit(a.held)
}

// chargeItem charges x's bytes; creditItem credits them.
func (a *account) chargeItem(x *item) error {
	if a == nil {
		return nil
	}
	return a.charge(ElementBytes(&x.el))
}

func (a *account) creditItem(x *item) {
	if a == nil {
		return
	}
	a.credit(ElementBytes(&x.el))
}

func (a *account) creditItemRemote(x *item) {
	if a == nil {
		return
	}
	a.creditRemote(ElementBytes(&x.el))
}

// ElementBytes is what a budget counts for an element: its tensors'
// payload bytes (tensor.ByteSize) and their shapes.
func ElementBytes(e *tensor.Element) int64 {
	var n int64
	for i := range e.Tensors {
		t := &e.Tensors[i]
		n += int64(t.ByteSize()) + 8*int64(len(t.Shape))
	}
	return n
}

// formatBytes writes n in binary units: 512 B, 1.5 KiB, 1.2 GiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for (v >= unit || v <= -unit) && u < 6 {
		v /= unit
		u++
	}
	s := fmt.Sprintf("%.1f", v)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}[u]
}
