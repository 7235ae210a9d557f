package mesh

import (
	"log/slog"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh/api"
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
