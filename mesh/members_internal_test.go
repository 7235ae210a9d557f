package mesh

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/plan"
)

// Dead members are kept as long as the reconnect loop retries them
// (deadRetention), departed ones only for the retention.
func TestMemberTableRetention(t *testing.T) {
	tb := newMemberTable(slog.New(slog.DiscardHandler), time.Hour, 24*time.Hour)
	old := time.Now().Add(-2 * time.Hour)
	tb.entries["dead-2h"] = &memberEntry{status: api.StatusDead, since: old}
	tb.entries["left-2h"] = &memberEntry{status: api.StatusLeft, since: old}
	tb.entries["dead-25h"] = &memberEntry{status: api.StatusDead, since: time.Now().Add(-25 * time.Hour)}
	got := map[string]bool{}
	for _, m := range tb.snapshot() {
		got[m.Name] = true
	}
	if !got["dead-2h"] || got["left-2h"] || got["dead-25h"] {
		t.Fatalf("kept %v; want only dead-2h", got)
	}
}

// After a failover two members advertise themselves as leader while gossip
// still holds the dead one alive: a node outside Raft believes the newest
// claim, whatever the names' order, and never a dead member's or its own.
func TestNewestLeader(t *testing.T) {
	tb := newMemberTable(slog.New(slog.DiscardHandler), time.Hour, time.Hour)
	claim := func(name, addr, role string) {
		t.Helper()
		tb.set(&memberlist.Node{Name: name, Meta: mustMeta(t, addr, role)}, api.StatusAlive)
		time.Sleep(time.Millisecond) // claims in order of arrival
	}
	if got := tb.newestLeader("self"); got != "" {
		t.Fatalf("no member: %q", got)
	}
	claim("self", "self:1", plan.RoleLeader)
	claim("a", "a:1", plan.RoleVoter)
	if got := tb.newestLeader("self"); got != "" {
		t.Fatalf("only self leads: %q", got)
	}
	claim("a", "a:1", plan.RoleLeader)
	claim("b", "b:1", plan.RoleLeader) // elected after a died, gossip not yet knowing
	if got := tb.newestLeader("self"); got != "b:1" {
		t.Fatalf("b's claim is newer: %q", got)
	}
	claim("b", "b:1", plan.RoleLeader) // the same claims gossiped again
	claim("a", "a:1", plan.RoleLeader)
	if got := tb.newestLeader("self"); got != "b:1" {
		t.Fatalf("a repeated claim is not a new one: %q", got)
	}
	tb.set(&memberlist.Node{Name: "b", Meta: mustMeta(t, "b:1", plan.RoleLeader)}, api.StatusDead)
	if got := tb.newestLeader("self"); got != "a:1" {
		t.Fatalf("b died: %q", got)
	}
}

func mustMeta(t *testing.T, addr, role string) []byte {
	t.Helper()
	b, err := nodeMeta{Addr: addr, Raft: role}.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
