package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// Config configures one Raft server. Use DefaultConfig or FastConfig and
// change what you need; Open validates it once.
type Config struct {
	// ID is this server's Raft id: the node name. It must be stable across
	// restarts, since the log and the configuration refer to it.
	ID string
	// Addr is the address peers dial to reach this server (the node's QUIC
	// host:port). It is what the stream layer's Dial receives.
	Addr string
	// AddressOf, when set, gives a server's current address by its id;
	// Raft dials that rather than the address the configuration recorded
	// (hashicorp/raft's ServerAddressProvider), falling back to the
	// recorded one when ok is false. A server whose address changes while
	// its id and state stay (a Kubernetes pod started again gets a new IP)
	// is then reached at once, even when no leader exists to change the
	// configuration (every voter moved).
	AddressOf func(id string) (addr string, ok bool)
	// DataDir holds raft.db (raft-boltdb: log and stable store) and
	// snapshots/. It is created if missing. A DataDir that already holds Raft
	// state makes Node.HasState true: the node must not bootstrap again.
	DataDir string

	// HeartbeatTimeout is how long a follower waits without contact from the
	// leader before it becomes a candidate. Lower means faster failover and
	// more spurious elections on a loaded machine.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for an election to end
	// before it starts a new one. Must be >= HeartbeatTimeout.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without reaching
	// a quorum. Must be <= HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the longest the leader waits before sending an
	// AppendEntries with no new entries, so followers learn the commit index.
	CommitTimeout time.Duration

	// SnapshotInterval is how often Raft checks whether to snapshot (it adds
	// random jitter so nodes do not all snapshot at once).
	SnapshotInterval time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot make
	// a check take a snapshot.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries stay in the log after a snapshot, so a
	// slightly lagging follower catches up from the log instead of a snapshot.
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots are kept on disk (at least 1).
	SnapshotRetain int

	// MaxPool is how many outbound connections the NetworkTransport keeps
	// per peer for reuse.
	MaxPool int
	// TransportTimeout bounds each NetworkTransport I/O operation (snapshot
	// installs scale it with their size).
	TransportTimeout time.Duration

	// MaxCommandBytes bounds one encoded Command: a larger one is rejected
	// by Node.Apply before it reaches Raft. (The FSM refuses entries above
	// the fixed MaxCommandBytesLimit on its own; it cannot use this field,
	// since nodes with different configs must still apply identically.)
	MaxCommandBytes int

	// Logger receives hashicorp/raft's log, bridged from hclog: raft's info
	// chatter is logged at slog debug, its warnings and errors as such. Nil
	// means discard.
	Logger *slog.Logger

	// BeforeApply, when set, is called on the FSM goroutine before the
	// state machine applies a command entry, with the entry's index.
	// Blocking in it holds back this node's state machine only, as a slow
	// disk or a starved core would: its log, commit index and elections go
	// on. Tests use it to make a rare interleaving happen on purpose; nil
	// in a real node.
	BeforeApply func(index uint64)
}

// DefaultConfig is for real deployments: raft's LAN timings, made a little
// sturdier (1 s heartbeat and election timeouts, 500 ms lease) so a loaded
// node does not trigger elections.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotInterval:   2 * time.Minute,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		MaxPool:            3,
		TransportTimeout:   10 * time.Second,
		MaxCommandBytes:    1 << 20,
	}
}

// FastConfig is for tests and in-process clusters on loopback: 100/100/50 ms
// timeouts give a leader failover of about 200 ms.
func FastConfig() Config {
	c := DefaultConfig()
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotInterval = 5 * time.Second
	c.SnapshotThreshold = 1024
	c.TrailingLogs = 1024
	c.TransportTimeout = 2 * time.Second
	return c
}

// Validate reports every invalid field, each error naming it.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("raftnode config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.ID == "" {
		bad("ID", "empty: set the node name")
	}
	if c.Addr == "" {
		bad("Addr", "empty: set the address peers dial (host:port)")
	}
	if c.DataDir == "" {
		bad("DataDir", "empty: set a directory for raft.db and snapshots")
	}
	// Raft's own minimums are 5 ms for these three and 10 ms for commit.
	positive := func(field string, d, min time.Duration) {
		if d < min {
			bad(field, "%v: want at least %v", d, min)
		}
	}
	positive("HeartbeatTimeout", c.HeartbeatTimeout, 5*time.Millisecond)
	positive("ElectionTimeout", c.ElectionTimeout, 5*time.Millisecond)
	positive("LeaderLeaseTimeout", c.LeaderLeaseTimeout, 5*time.Millisecond)
	positive("CommitTimeout", c.CommitTimeout, time.Millisecond)
	positive("SnapshotInterval", c.SnapshotInterval, 5*time.Millisecond)
	positive("TransportTimeout", c.TransportTimeout, time.Millisecond)
	if c.ElectionTimeout < c.HeartbeatTimeout {
		bad("ElectionTimeout", "%v is below HeartbeatTimeout %v", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		bad("LeaderLeaseTimeout", "%v is above HeartbeatTimeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.SnapshotThreshold == 0 {
		bad("SnapshotThreshold", "0: want at least 1")
	}
	if c.SnapshotRetain < 1 {
		bad("SnapshotRetain", "%d: want at least 1", c.SnapshotRetain)
	}
	if c.MaxPool < 1 {
		bad("MaxPool", "%d: want at least 1", c.MaxPool)
	}
	if c.MaxCommandBytes < 64 || c.MaxCommandBytes > fsm.MaxCommandBytesLimit {
		bad("MaxCommandBytes", "%d: want 64..%d", c.MaxCommandBytes, fsm.MaxCommandBytesLimit)
	}
	return errors.Join(errs...)
}
