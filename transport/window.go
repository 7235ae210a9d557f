package transport

import (
	"context"
	"sync"

	"github.com/quic-go/quic-go"
)

// windowBudget bounds the flow-control window quic-go's auto-tuning may
// add to this transport's connections, together (Config.MaxReceiveWindowBytes).
// quic-go buffers what a peer sends and nobody has read yet, up to a
// connection's window: without a bound, each of MaxIncomingConns
// connections could hold ConnectionReceiveWindow unread. Each connection
// starts with the initial window (Config.InitialReceiveWindow) for free; every increase beyond
// takes from the budget, which a connection gives back when it closes.
// Denied, the window stays as it is: the connection still works, with the
// throughput that window allows.
type windowBudget struct {
	max int64

	mu      sync.Mutex
	used    int64
	maxUsed int64         // the most used at once (tests, metrics)
	per     map[any]int64 // connection → what it took
}

func newWindowBudget(max int64) *windowBudget {
	return &windowBudget{max: max, per: map[any]int64{}}
}

// take reports whether conn may grow its window by delta, and takes it if
// so; first says whether conn had taken nothing before (the caller then
// arranges for release when it closes).
func (b *windowBudget) take(conn any, delta uint64) (ok, first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if delta > uint64(b.max) || b.used+int64(delta) > b.max {
		return false, false
	}
	_, had := b.per[conn]
	b.used += int64(delta)
	b.maxUsed = max(b.maxUsed, b.used)
	b.per[conn] += int64(delta)
	return true, !had
}

// release gives back what conn took.
func (b *windowBudget) release(conn any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= b.per[conn]
	delete(b.per, conn)
}

// inUse is the window granted beyond the initial ones, over every
// connection open.
func (b *windowBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// peak is the most window granted at once since the transport started.
func (b *windowBudget) peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxUsed
}

// allow is quic.Config.AllowConnectionWindowIncrease. quic-go calls it
// with its own locks held: it only counts, and reads the connection's
// context, which calls nothing on the connection.
func (b *windowBudget) allow(conn *quic.Conn, delta uint64) bool {
	ok, first := b.take(conn, delta)
	if first {
		context.AfterFunc(conn.Context(), func() { b.release(conn) })
	}
	return ok
}

// ReceiveWindowInUse is the flow-control window this transport's
// connections were granted beyond their initial windows, together: at most
// Config.MaxReceiveWindowBytes.
func (t *Transport) ReceiveWindowInUse() int64 { return t.windows.inUse() }
