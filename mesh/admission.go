package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// Admission (issue 36): gossip admits a member only once this node has
// checked, over QUIC, that a node of that name answers at the QUIC address
// the member advertises: under mutual TLS, its certificate names it a node
// of the cluster with that name; without identities (dev mode, --insecure)
// the node there answers status with that name. A member that fails the
// check never reaches the member table, so it takes no voter slot, is
// assigned no job, and cannot cost the cluster its leader: a fake member
// with nothing behind its address, added to a single-node cluster, left it
// without a leader for good before.
//
// memberlist asks NotifyAlive for every alive message, and for every
// member a push/pull merges; it must not block there. An unknown member
// is refused and checked in the background; once it passes, a push/pull
// with it (Join) brings it in at once, not at the next periodic one.

// Bounds of admission, and the pace of its checks.
const (
	// maxAdmitChecks bounds the checks in flight; beyond it an unknown
	// member is refused unchecked until one ends (strangers flooding the
	// gossip port with names cannot make the node dial without end).
	maxAdmitChecks = 16
	// maxAdmitted bounds the (name, address) pairs remembered as checked;
	// past it the table starts again (a member is checked anew).
	maxAdmitted = 4096
	// admitTimeout bounds one check: dialling the member and its answer.
	admitTimeout = 3 * time.Second
	// admitRetry is how long a member that failed a check is refused
	// without another.
	admitRetry = 2 * time.Second
)

// admission holds what the node has checked.
type admission struct {
	n *Node
	// ml is the node's memberlist once Create returned (its callbacks,
	// and so the checks, may start before).
	ml atomic.Pointer[memberlist.Memberlist]

	mu       sync.Mutex
	admitted map[admitKey]bool      // checked and passed
	failed   map[admitKey]time.Time // last failed check
	inFlight map[admitKey]bool      // checks in flight
	toJoin   map[string]string      // admitted, not yet brought in: name → gossip address (admitjoin.go)
	joining  bool                   // joinAdmitted runs
}

type admitKey struct{ name, addr string }

func newAdmission(n *Node) *admission {
	return &admission{n: n, admitted: map[admitKey]bool{}, failed: map[admitKey]time.Time{}, inFlight: map[admitKey]bool{}, toJoin: map[string]string{}}
}

// NotifyAlive implements memberlist.AliveDelegate: peer is admitted when
// this node has checked it (see the top of this file).
func (a *admission) NotifyAlive(peer *memberlist.Node) error {
	if peer.Name == a.n.name {
		return nil
	}
	meta, err := decodeMeta(peer.Meta)
	if err != nil {
		return fmt.Errorf("member %s: %w", peer.Name, err)
	}
	k := admitKey{peer.Name, meta.Addr}
	gossip := net.JoinHostPort(peer.Addr.String(), strconv.Itoa(int(peer.Port)))
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.admitted[k]:
		return nil
	case a.inFlight[k]:
	case time.Since(a.failed[k]) < admitRetry:
	case len(a.inFlight) >= maxAdmitChecks, a.n.ctx.Err() != nil:
	default:
		a.inFlight[k] = true
		a.n.wg.Add(1)
		go a.check(k, gossip)
	}
	return fmt.Errorf("member %s at %s: %s: this node has not checked that a node of that name answers there", peer.Name, meta.Addr, notAdmittedYet)
}

// notAdmittedYet marks the refusals of members being checked, which the
// node logs at debug level (logging.go).
const notAdmittedYet = "not admitted (yet)"

// check checks k and, when it passes, brings the member in through a
// push/pull with its gossip address.
func (a *admission) check(k admitKey, gossip string) {
	defer a.n.wg.Done()
	defer func() { // after the push/pull: formation waits for it (checking)
		a.mu.Lock()
		delete(a.inFlight, k)
		a.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(a.n.ctx, admitTimeout)
	err := a.n.verifyNode(ctx, k.name, k.addr)
	cancel()
	a.mu.Lock()
	if err != nil {
		if len(a.failed) >= maxAdmitted {
			clear(a.failed)
		}
		a.failed[k] = time.Now()
	} else {
		if len(a.admitted) >= maxAdmitted {
			clear(a.admitted)
		}
		a.admitted[k] = true
		delete(a.failed, k)
	}
	a.mu.Unlock()
	if err != nil {
		if a.n.ctx.Err() == nil {
			a.n.log.Warn("gossip member not admitted: no node of its name answers at its address", "member", k.name, "addr", k.addr, "err", err)
		}
		return
	}
	a.n.log.Debug("gossip member admitted", "member", k.name, "addr", k.addr)
	a.joinSoon(k.name, gossip) // admitjoin.go
}

// checking reports whether a check, or the push/pull that brings in the
// members that passed one, is in flight: a member gossip told of is not
// in the member table yet, and may be once it passes. Formation
// waits for it (loops.go): bootstrapping on a partial view could start
// two clusters.
func (a *admission) checking() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.inFlight) > 0 || a.joining
}

// errNotThatNode: the node at a member's address is not that member.
var errNotThatNode = errors.New("the node there is another")

// verifyNode checks that the node at addr is the node name: its
// certificate says so under mutual TLS; without identities its status
// does.
func (n *Node) verifyNode(ctx context.Context, name, addr string) error {
	// A connection of its own, closed after the check: most members are
	// checked once and never spoken to again (transport/privateconn.go).
	ctx, done := transport.WithPrivateConn(ctx)
	defer done()
	s, err := n.tr.Dial(ctx, addr, transport.KindControl)
	if err != nil {
		return err
	}
	id, authenticated := s.Peer()
	s.Close()
	if authenticated && (!id.IsNode() || id.Name != name) {
		return fmt.Errorf("%w: its certificate names %s, not node %s", errNotThatNode, id, name)
	}
	var st api.Status
	if err := transport.Call(ctx, n.tr, n.codec, addr, api.MethodStatus, struct{}{}, &st); err != nil {
		return err
	}
	if st.Name != name {
		return fmt.Errorf("%w: it is %q, not %q", errNotThatNode, st.Name, name)
	}
	return nil
}
