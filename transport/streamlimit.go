package transport

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/quic-go/quic-go"
)

// Limits on data streams: how many batch streams (KindData) a node serves at
// once, in total and to one remote IP address. Every data stream costs the
// worker a goroutine, a batch sender and its window of encoded batches, so a
// node serving every stream peers open could be made to hold without bound
// (quic-go alone allows MaxIncomingConns × MaxIncomingStreams of them). A
// stream over a limit is reset with codeTooManyStreams before anything is
// read from it, and the client's read or write fails with an error wrapping
// ErrStreamRefused that names the limit.

// codeTooManyStreams resets a data stream over MaxDataStreams or
// MaxDataStreamsPerAddr.
const codeTooManyStreams quic.StreamErrorCode = 2

// ErrStreamRefused is wrapped by the error of a stream the remote node reset
// because it serves as many data streams as its limits allow
// (MaxDataStreams, MaxDataStreamsPerAddr; flags --max-data-streams and
// --max-data-streams-per-addr). It is not the job's failure: the stream may
// be opened again once others have closed, or to another worker.
var ErrStreamRefused = errors.New("stream refused: the node serves as many data streams as its limits allow (MaxDataStreams, MaxDataStreamsPerAddr: --max-data-streams, --max-data-streams-per-addr)")

// Refusals counts what this transport refused at its limits since it started.
type Refusals struct {
	// Conns: connections closed at MaxIncomingConns or MaxConnsPerAddr.
	Conns int64
	// DataStreams: data streams reset at MaxDataStreams or MaxDataStreamsPerAddr.
	DataStreams int64
	// ControlStreams: control streams reset at MaxRPCStreamsPerConn or
	// MaxRPCStreamsPerAddr.
	ControlStreams int64
}

// refusals are the counters behind Refusals.
type refusals struct {
	conns, data, control atomic.Int64
}

// Refusals returns the counts of connections and streams refused at the limits.
func (t *Transport) Refusals() Refusals {
	return Refusals{Conns: t.refused.conns.Load(), DataStreams: t.refused.data.Load(), ControlStreams: t.refused.control.Load()}
}

// DataStreams returns how many data streams this node serves now (routed to
// the data listener and not yet closed).
func (t *Transport) DataStreams() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dataStreams
}

// admitData counts a data stream against the node's and its address's
// limits; it returns the function that gives it back, or nil (and an error
// naming the limit reached) when one is reached.
func (t *Transport) admitData(cs *connState) (func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dataStreams >= t.cfg.MaxDataStreams {
		return nil, fmt.Errorf("MaxDataStreams (%d) reached", t.cfg.MaxDataStreams)
	}
	if cs.addr.dataStreams >= t.cfg.MaxDataStreamsPerAddr {
		return nil, fmt.Errorf("MaxDataStreamsPerAddr (%d) reached for %s", t.cfg.MaxDataStreamsPerAddr, cs.addr.ip)
	}
	t.dataStreams++
	cs.addr.dataStreams++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.dataStreams--
		cs.addr.dataStreams--
		t.dropAddrLocked(cs.addr)
	}, nil
}

// dropAddrLocked forgets an address's accounting once nothing counts on it.
func (t *Transport) dropAddrLocked(as *addrState) {
	if as.conns == 0 && as.rpcStreams == 0 && as.dataStreams == 0 && t.addrs[as.ip] == as {
		delete(t.addrs, as.ip)
	}
}

// refusedErr turns the reset of a stream at the remote's data-stream limits
// into an error wrapping ErrStreamRefused; other errors are returned as they
// are.
func refusedErr(err error, remote string) error {
	var se *quic.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == codeTooManyStreams {
		return fmt.Errorf("node %s: %w", remote, ErrStreamRefused)
	}
	return err
}
