package cli

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/client"
)

// TestWithDecisions: a log at WARN shows warnings and the client's INFO
// line of a decision (client.DecisionKey), not its other INFO or DEBUG
// lines, with attributes added before or after.
func TestWithDecisions(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(WithDecisions(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo}), slog.LevelWarn)).With("component", "c")
	l.Info("other info")
	l.Debug("debug", client.DecisionKey, true)
	l.Info("the decision", "job", "j", client.DecisionKey, true)
	l.Warn("a warning")
	out := b.String()
	for _, want := range []string{"the decision", "a warning", "component=c"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
	for _, not := range []string{"other info", "debug"} {
		if strings.Contains(out, not) {
			t.Errorf("shown: %q in %q", not, out)
		}
	}
}
