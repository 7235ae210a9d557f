package mesh

import (
	"fmt"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/fxamacker/cbor/v2"
)

// maxMetaBytes is memberlist's limit on node metadata; it panics above it.
const maxMetaBytes = 512

// nodeMeta is what every node advertises through gossip.
type nodeMeta struct {
	// Addr is the node's QUIC address (Raft, control, data).
	Addr string `cbor:"1,keyasint"`
	// Raft is the node's role as it sees it: leader, voter, nonvoter, none.
	Raft string `cbor:"2,keyasint"`
	// Version is the build version.
	Version string `cbor:"3,keyasint"`
	// Leaving is set just before a graceful leave, so that other members
	// record the departure as "left" rather than "dead".
	Leaving bool `cbor:"4,keyasint,omitempty"`
	// NoWorker: the node runs no tasks (WorkerConfig.Disabled).
	NoWorker bool `cbor:"5,keyasint,omitempty"`
	// Incarnation is the node's process (Node.incarnation).
	Incarnation uint64 `cbor:"6,keyasint,omitempty"`
	// Protocol is the state machine's protocol level this node speaks
	// (fsm.Protocol); 0 from a node of a release before levels, which
	// speaks fsm.ProtocolLegacy.
	Protocol int `cbor:"7,keyasint,omitempty"`
}

var metaDec = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		MaxNestedLevels:  4,
		MaxArrayElements: 16,
		MaxMapPairs:      16,
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

func (m nodeMeta) encode() ([]byte, error) {
	b, err := cbor.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetaBytes {
		return nil, fmt.Errorf("gossip metadata is %d bytes, over memberlist's limit of %d", len(b), maxMetaBytes)
	}
	return b, nil
}

func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) > maxMetaBytes {
		return m, fmt.Errorf("gossip metadata of %d bytes exceeds %d", len(b), maxMetaBytes)
	}
	if err := metaDec.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode gossip metadata: %w", err)
	}
	return m, nil
}

// setMeta and setMetaLeaving publish this node's gossip metadata; the
// delegate hands it to memberlist.
func (n *Node) setMeta(role string) error {
	return n.storeMeta(nodeMeta{Addr: n.addr, Raft: role, Version: Version, NoWorker: n.cfg.Worker.Disabled, Incarnation: n.incarnation, Protocol: fsm.Protocol})
}

func (n *Node) setMetaLeaving(role string) error {
	return n.storeMeta(nodeMeta{Addr: n.addr, Raft: role, Version: Version, Leaving: true, NoWorker: n.cfg.Worker.Disabled, Incarnation: n.incarnation, Protocol: fsm.Protocol})
}

func (n *Node) storeMeta(m nodeMeta) error {
	b, err := m.encode()
	if err != nil {
		return err
	}
	n.delegate.meta.Store(&b)
	return nil
}
