package api

import "time"

// Member statuses as `feedmesh members` shows them. memberlist keeps
// suspicion private, so a suspect member shows as alive until it is
// declared dead; StatusSuspect is reserved for when that changes.
const (
	StatusAlive   = "alive"
	StatusSuspect = "suspect"
	StatusDead    = "dead"
	StatusLeft    = "left"
)

// Member is one node as the answering node's gossip sees it.
type Member struct {
	Name       string `json:"name"`
	GossipAddr string `json:"gossip_addr"`
	// Addr is the member's QUIC address (control, Raft, data).
	Addr   string `json:"addr"`
	Status string `json:"status"`
	// Raft is the role the member advertises: leader, voter, nonvoter or none.
	Raft    string `json:"raft"`
	Version string `json:"version,omitempty"`
	// Worker: the member runs tasks (false for control-only nodes).
	Worker bool `json:"worker"`
	// Since is when the member entered its current status, as seen there.
	Since time.Time `json:"since"`
	// Incarnation identifies the member's process (its start time, Unix
	// nanoseconds; 0 from a node that does not say).
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Protocol is the state machine's protocol level the member speaks (1
	// for a node of a release before levels).
	Protocol int `json:"protocol,omitempty"`
}

// Status is a node's view of the Raft group, as `feedmesh status` shows it.
type Status struct {
	Name         string  `json:"name"`
	Addr         string  `json:"addr"`
	GossipAddr   string  `json:"gossip_addr"`
	Version      string  `json:"version"`
	Role         string  `json:"role"`
	State        string  `json:"state"`
	Leader       string  `json:"leader"`
	LeaderAddr   string  `json:"leader_addr"`
	Term         uint64  `json:"term"`
	CommitIndex  uint64  `json:"commit_index"`
	AppliedIndex uint64  `json:"applied_index"`
	LastLogIndex uint64  `json:"last_log_index"`
	Voters       []Voter `json:"voters"`
	Members      int     `json:"members"`
	AliveMembers int     `json:"alive_members"`
	// ShareWindowBytes is the byte bound of each ephemeral-sharing window
	// on this node (WorkerConfig.ShareWindowBytes, share.window_bytes).
	ShareWindowBytes int64 `json:"share_window_bytes"`
	// NodesWanted is how many nodes the jobs would want (NodesWanted), as
	// this node's replica of the cluster state has them: current on the
	// leader, 0 on a node that holds no replica (not a voter);
	// WorkerNodes the alive members that run tasks. An external
	// autoscaler adds nodes while NodesWanted > WorkerNodes.
	NodesWanted int `json:"nodes_wanted"`
	WorkerNodes int `json:"worker_nodes"`
	// Protocol is the cluster's protocol level as this node sees it: the
	// least its Raft servers speak. The cluster writes the commands and
	// snapshots of that level, so that mixed releases (a rolling upgrade)
	// apply every entry alike; it rises once every server speaks more.
	Protocol int `json:"protocol,omitempty"`
}

// ProtocolLocalCensus is the protocol level (Status.Protocol;
// internal/fsm's ProtocolLocalCensus) from which a client's local worker
// is leased a census: an at-most-once job with an offload fraction needs
// it to count its loss and end once its node workers are dead.
const ProtocolLocalCensus = 4

// Voter is one Raft voter in Status.
type Voter struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// PutRequest writes a key through Raft.
type PutRequest struct {
	Key   string `cbor:"1,keyasint"`
	Value []byte `cbor:"2,keyasint"`
	// Forwarded is set by a node passing the request to the leader; a
	// forwarded request is never forwarded again.
	Forwarded bool `cbor:"3,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// IfAbsent writes only if Key is not set (the first writer wins);
	// PutResponse.Value is then the key's value after the write.
	IfAbsent bool `cbor:"4,keyasint,omitempty"`
}

// PutResponse tells where the write landed in the log.
type PutResponse struct {
	Index uint64 `cbor:"1,keyasint"`
	// Value (IfAbsent) is the key's value after the write.
	Value []byte `cbor:"2,keyasint,omitempty"`
}

// GetRequest reads a key. By default the read is linearizable (served by
// the leader after a barrier); Stale reads the answering node's own copy.
type GetRequest struct {
	Key       string `cbor:"1,keyasint"`
	Stale     bool   `cbor:"2,keyasint,omitempty"`
	Forwarded bool   `cbor:"3,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
}

// GetResponse carries the value, if any.
type GetResponse struct {
	Value []byte `cbor:"1,keyasint"`
	Found bool   `cbor:"2,keyasint"`
}
