package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

// tcpLayer is a raft.StreamLayer over TCP, standing in for the mesh's QUIC
// stream layer.
type tcpLayer struct{ net.Listener }

func (l tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func listen(t testing.TB, addr string) tcpLayer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	return tcpLayer{ln}
}

func testConfig(t testing.TB, id, addr, dir string) Config {
	c := FastConfig()
	c.ID, c.Addr, c.DataDir = id, addr, dir
	c.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	return c
}

// testNode is one node of a test cluster and what it needs to restart.
type testNode struct {
	id, addr, dir string
	*Node
}

func openNode(t testing.TB, id, addr, dir string) *testNode {
	t.Helper()
	layer := listen(t, addr)
	n, err := Open(testConfig(t, id, layer.Addr().String(), dir), layer)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return &testNode{id: id, addr: layer.Addr().String(), dir: dir, Node: n}
}

// startCluster opens n nodes and forms the cluster the way the mesh does:
// every node runs BootstrapPlan on the same gossip view.
func startCluster(t testing.TB, n int) []*testNode {
	t.Helper()
	var nodes []*testNode
	var members []plan.Member
	for i := range n {
		id := fmt.Sprintf("node-%d", i)
		tn := openNode(t, id, "127.0.0.1:0", filepath.Join(t.TempDir(), id))
		if tn.HasState() {
			t.Fatalf("%s: fresh data dir reports state", id)
		}
		nodes = append(nodes, tn)
		members = append(members, plan.Member{ID: id, Addr: tn.addr, Alive: true})
	}
	for _, tn := range nodes {
		voters, boot := plan.BootstrapPlan(tn.id, n, members)
		if !boot || len(voters) != n {
			t.Fatalf("%s: plan %v, %v", tn.id, voters, boot)
		}
		// A late member may already have the configuration, replicated by
		// the leader its peers elected: that is success too.
		if err := tn.Bootstrap(voters); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			t.Fatalf("bootstrap %s: %v", tn.id, err)
		}
	}
	return nodes
}

// waitLeader waits until exactly one of nodes leads and all of them agree.
func waitLeader(t testing.TB, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	testutil.WaitFor(t, 5*time.Second, "a single agreed leader", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if id, addr := n.Leader(); id != leader.id || addr != leader.addr {
				return false
			}
		}
		return true
	})
	return leader
}

func waitValue(t *testing.T, nodes []*testNode, key, want string) {
	t.Helper()
	for _, n := range nodes {
		testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("%s=%s on %s", key, want, n.id), func() bool {
			v, ok := n.Get(key)
			return ok && string(v) == want
		})
	}
}

func TestClusterFailoverAndRestart(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx := testutil.Ctx(t, 5*time.Second)

	res, err := leader.Apply(ctx, fsm.NewPutKV("k1", []byte("v1")))
	if err != nil {
		t.Fatalf("apply on leader: %v", err)
	}
	if res.Index == 0 {
		t.Fatal("result without a log index")
	}
	waitValue(t, nodes, "k1", "v1")

	checkLeaderAndFollowers(t, ctx, nodes, leader)

	// Kill the leader: a new one takes over and writes continue.
	killedAt := time.Now()
	if err := leader.Close(); err != nil {
		t.Fatalf("close leader: %v", err)
	}
	if err := leader.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := leader.Apply(ctx, fsm.NewPutKV("x", nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
	var rest []*testNode
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	newLeader := waitLeader(t, rest)
	t.Logf("failover: new leader %s after %v", newLeader.id, time.Since(killedAt))
	select {
	case became := <-newLeader.LeaderCh():
		if !became {
			t.Fatal("LeaderCh of the new leader reports false")
		}
	case <-ctx.Done():
		t.Fatal("new leader's LeaderCh stayed silent")
	}
	if _, err := newLeader.Apply(ctx, fsm.NewPutKV("k2", []byte("v2"))); err != nil {
		t.Fatalf("apply on new leader: %v", err)
	}
	if _, err := newLeader.Apply(ctx, fsm.NewDeleteKV("k1")); err != nil {
		t.Fatal(err)
	}

	// Restart the killed node from its data dir: no bootstrap, it catches up.
	back := openNode(t, leader.id, leader.addr, leader.dir)
	if !back.HasState() {
		t.Fatal("restarted node reports no state")
	}
	if err := back.Bootstrap([]plan.Server{{ID: back.id, Addr: back.addr}}); !errors.Is(err, raft.ErrCantBootstrap) {
		t.Fatalf("bootstrap over state: %v", err)
	}
	all := append(rest, back)
	waitValue(t, all, "k2", "v2")
	testutil.WaitFor(t, 5*time.Second, "k1 deleted on restarted node", func() bool {
		_, ok := back.Get("k1")
		return !ok
	})
	if l := waitLeader(t, all); l == nil {
		t.Fatal("no leader after restart")
	}
}

// checkLeaderAndFollowers checks a running cluster whose key k1 is v1:
// followers refuse commands, the leader commits and rejects a command of
// an unknown version, and Status reports each node's role.
func checkLeaderAndFollowers(t *testing.T, ctx context.Context, nodes []*testNode, leader *testNode) {
	t.Helper()
	// Followers refuse.
	for _, n := range nodes {
		if n == leader {
			continue
		}
		if _, err := n.Apply(ctx, fsm.NewPutKV("k1", []byte("x"))); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("apply on follower %s: err = %v, want ErrNotLeader", n.id, err)
		}
		if err := n.Barrier(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("barrier on follower: %v", err)
		}
	}

	// A command this node does not know is committed and rejected, nowhere applied.
	bad := fsm.NewPutKV("k1", []byte("newer"))
	bad.Version = 9
	res, err := leader.Apply(ctx, bad)
	if !errors.Is(err, ErrRejected) || !errors.Is(err, fsm.ErrUnknownVersion) || res.Index == 0 {
		t.Fatalf("unknown version: res %+v, err %v", res, err)
	}
	if err := leader.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := leader.Get("k1"); string(v) != "v1" {
		t.Fatalf("rejected command changed k1 to %q", v)
	}

	// Status on the leader.
	st := leader.Status()
	if st.Role != plan.RoleLeader || st.State != "Leader" || len(st.Voters) != 3 || st.Term == 0 ||
		st.CommitIndex < res.Index || st.AppliedIndex < res.Index || st.LastLogIndex < res.Index || st.Leader != leader.id {
		t.Fatalf("leader status: %+v", st)
	}
	for _, n := range nodes {
		if n != leader {
			if st := n.Status(); st.Role != plan.RoleVoter || st.State != "Follower" {
				t.Fatalf("follower status: %+v", st)
			}
		}
	}
}

func TestAddRemoveServer(t *testing.T) {
	a := openNode(t, "a", "127.0.0.1:0", filepath.Join(t.TempDir(), "a"))
	voters, boot := plan.BootstrapPlan("a", 1, []plan.Member{{ID: "a", Addr: a.addr, Alive: true}})
	if !boot {
		t.Fatal("single node does not bootstrap")
	}
	if err := a.Bootstrap(voters); err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Ctx(t, 5*time.Second)
	select {
	case became := <-a.LeaderCh():
		if !became {
			t.Fatal("LeaderCh reports false")
		}
	case <-ctx.Done():
		t.Fatal("LeaderCh silent after single-node bootstrap")
	}
	waitLeader(t, []*testNode{a})
	if _, err := a.Apply(ctx, fsm.NewPutKV("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}

	b := openNode(t, "b", "127.0.0.1:0", filepath.Join(t.TempDir(), "b"))
	if st := b.Status(); st.Role != plan.RoleNone || len(st.Voters) != 0 {
		t.Fatalf("unjoined node status: %+v", st)
	}
	if err := b.AddVoter(ctx, plan.Server{ID: "x", Addr: "127.0.0.1:1"}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on non-leader: %v", err)
	}
	if err := a.AddVoter(ctx, plan.Server{ID: "b", Addr: b.addr}); err != nil {
		t.Fatalf("add voter: %v", err)
	}
	cfg, err := a.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.ConfigServer{{ID: "a", Addr: a.addr, Suffrage: plan.SuffrageVoter}, {ID: "b", Addr: b.addr, Suffrage: plan.SuffrageVoter}}
	if fmt.Sprint(cfg) != fmt.Sprint(want) {
		t.Fatalf("configuration %v, want %v", cfg, want)
	}
	waitValue(t, []*testNode{b}, "k", "v")
	testutil.WaitFor(t, 5*time.Second, "b sees itself as voter", func() bool {
		st := b.Status()
		return st.Role == plan.RoleVoter && len(st.Voters) == 2 && st.Leader == "a"
	})

	// Through whichever node leads: on a loaded machine two voters can
	// trade leadership (a missed heartbeat), and a follower refuses.
	var removeErr error
	testutil.WaitFor(t, 10*time.Second, "b removed through the leader", func() bool {
		for _, n := range []*testNode{a, b} {
			if n.Status().Role == plan.RoleLeader {
				removeErr = n.RemoveServer(ctx, "b")
				return removeErr == nil
			}
		}
		return false
	})
	if removeErr != nil {
		t.Fatalf("remove server: %v", removeErr)
	}
	testutil.WaitFor(t, 10*time.Second, "a leads alone", func() bool {
		st := a.Status()
		return st.Role == plan.RoleLeader && len(st.Voters) == 1
	})
	if cfg, _ := a.Configuration(); len(cfg) != 1 || cfg[0].ID != "a" {
		t.Fatalf("configuration after remove: %v", cfg)
	}
	if _, err := a.Apply(ctx, fsm.NewPutKV("k", []byte("after"))); err != nil {
		t.Fatalf("single voter keeps committing: %v", err)
	}
}

// TestSnapshotRestoreOnRestart: state that went into a snapshot (and a log
// trimmed behind it) comes back from the file snapshot store on restart.
func TestSnapshotRestoreOnRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	a := openNode(t, "a", "127.0.0.1:0", dir)
	if err := a.Bootstrap([]plan.Server{{ID: "a", Addr: a.addr}}); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, []*testNode{a})
	ctx := testutil.Ctx(t, 5*time.Second)
	for i := range 20 {
		if _, err := a.Apply(ctx, fsm.NewPutKV(fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, err := a.Apply(ctx, fsm.NewDeleteKV("k3")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openNode(t, "a", a.addr, dir)
	if !b.HasState() {
		t.Fatal("no state after restart")
	}
	waitLeader(t, []*testNode{b})
	if err := b.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		v, ok := b.Get(fmt.Sprintf("k%d", i))
		if i == 3 {
			if ok {
				t.Fatal("k3 came back")
			}
			continue
		}
		if !ok || string(v) != fmt.Sprint(i) {
			t.Fatalf("k%d = %q, %v", i, v, ok)
		}
	}
}

func TestApplyLimitsAndContext(t *testing.T) {
	a := openNode(t, "a", "127.0.0.1:0", filepath.Join(t.TempDir(), "a"))
	if err := a.Bootstrap([]plan.Server{{ID: "a", Addr: a.addr}}); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, []*testNode{a})
	big := fsm.NewPutKV("k", make([]byte, a.cfg.MaxCommandBytes))
	if _, err := a.Apply(testutil.Ctx(t, 5*time.Second), big); !errors.Is(err, fsm.ErrCommandTooLarge) {
		t.Fatalf("oversized command: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Apply(ctx, fsm.NewPutKV("k", nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: %v", err)
	}
	if err := a.Bootstrap([]plan.Server{{ID: "other", Addr: "x:1"}}); err == nil {
		t.Fatal("bootstrap without self accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err == nil {
		t.Fatal("config without ID/Addr/DataDir validates")
	}
	c := FastConfig()
	c.ID, c.Addr, c.DataDir = "a", "a:1", "/tmp/x"
	if err := c.Validate(); err != nil {
		t.Fatalf("fast config: %v", err)
	}
	d := DefaultConfig()
	d.ID, d.Addr, d.DataDir = "a", "a:1", "/tmp/x"
	if err := d.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for field, mutate := range map[string]func(*Config){
		"ElectionTimeout":    func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 },
		"LeaderLeaseTimeout": func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout },
		"SnapshotRetain":     func(c *Config) { c.SnapshotRetain = 0 },
		"MaxPool":            func(c *Config) { c.MaxPool = 0 },
		"MaxCommandBytes":    func(c *Config) { c.MaxCommandBytes = 0 },
		"HeartbeatTimeout":   func(c *Config) { c.HeartbeatTimeout = 0 },
		"SnapshotThreshold":  func(c *Config) { c.SnapshotThreshold = 0 },
	} {
		bad := c
		mutate(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v does not name the field", field, err)
		}
	}
	// Open validates too, and closes the layer it was given.
	layer := listen(t, "127.0.0.1:0")
	if _, err := Open(Config{}, layer); err == nil {
		t.Fatal("Open accepted an empty config")
	}
	if _, err := layer.Accept(); err == nil {
		t.Fatal("failed Open left the layer open")
	}
}

// TestCloseLeaksNoGoroutines: a cluster that replicated, elected and
// snapshotted leaves nothing running once every node is closed. No raft or
// bbolt goroutine is ignored.
func TestCloseLeaksNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx := testutil.Ctx(t, 5*time.Second)
	for i := range 10 {
		if _, err := leader.Apply(ctx, fsm.NewPutKV(fmt.Sprint(i), []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	waitValue(t, nodes, "9", "v")
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatalf("close %s: %v", n.id, err)
		}
	}
}

// TestApplyEach: the commands commit in the order given, each with its
// own result; one the state machine rejects does not stop the others.
func TestApplyEach(t *testing.T) {
	a := openNode(t, "a", "127.0.0.1:0", filepath.Join(t.TempDir(), "a"))
	if err := a.Bootstrap([]plan.Server{{ID: "a", Addr: a.addr}}); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, []*testNode{a})
	cmds := []fsm.Command{
		fsm.NewPutKVIfAbsent("k", []byte("first")),
		fsm.NewPutKV("", []byte("no key")), // rejected
		fsm.NewPutKVIfAbsent("k", []byte("second")),
		fsm.NewPutKV("k2", []byte("v2")),
	}
	res, errs := a.ApplyEach(testutil.Ctx(t, 10*time.Second), cmds)
	if len(res) != 4 || len(errs) != 4 {
		t.Fatalf("%d results, %d errors for 4 commands", len(res), len(errs))
	}
	if errs[0] != nil || string(res[0].Value.([]byte)) != "first" {
		t.Errorf("command 0: %v, %v", res[0].Value, errs[0])
	}
	if !errors.Is(errs[1], ErrRejected) {
		t.Errorf("command 1 (empty key): %v", errs[1])
	}
	// The third ran after the first: the key holds the first's value.
	if errs[2] != nil || string(res[2].Value.([]byte)) != "first" {
		t.Errorf("command 2: %v, %v", res[2].Value, errs[2])
	}
	if errs[3] != nil {
		t.Errorf("command 3: %v", errs[3])
	}
	for i := 1; i < 4; i++ {
		if res[i].Index <= res[i-1].Index {
			t.Errorf("indexes not in order: %d then %d", res[i-1].Index, res[i].Index)
		}
	}
	if v, ok := a.Get("k2"); !ok || string(v) != "v2" {
		t.Errorf("k2 = %q, %v", v, ok)
	}
	// Closed: every command fails with ErrClosed.
	a.Close()
	if _, errs := a.ApplyEach(t.Context(), cmds[:2]); !errors.Is(errs[0], ErrClosed) || !errors.Is(errs[1], ErrClosed) {
		t.Errorf("after Close: %v", errs)
	}
}
