package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/client"
)

// TestCallerHandlerKeepsDecisionLine: at the default level (warn) the
// records handed to Python are the warnings and the client's one INFO
// line of a job's offload and workers decision, not other INFO records;
// at "error" not even that line.
func TestCallerHandlerKeepsDecisionLine(t *testing.T) {
	takeLogs()
	l := slog.New(&callerHandler{level: slog.LevelWarn, decisions: true}).With("job", "j")
	l.Info("offload decision", client.DecisionKey, "offload=remote workers=all")
	l.Info("an ordinary info line")
	l.Warn("a warning")
	var msgs []string
	for _, r := range takeLogs() {
		msgs = append(msgs, r.Msg)
	}
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "offload decision") || !strings.Contains(msgs[0], "job=j") || !strings.HasPrefix(msgs[1], "a warning") {
		t.Fatalf("kept %q, want the decision line and the warning", msgs)
	}
	slog.New(&callerHandler{level: slog.LevelError}).Info("offload decision", client.DecisionKey, "x")
	if got := takeLogs(); len(got) != 0 {
		t.Fatalf("at level error kept %+v", got)
	}
}
