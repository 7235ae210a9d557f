package raftnode

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestHclogAdapterLevels(t *testing.T) {
	var buf bytes.Buffer
	l := newHclog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	n := l.Named("transport").With("peer", "b")
	n.Info("entering follower state")
	n.Debug("debug chatter")
	if buf.Len() != 0 || n.IsInfo() {
		t.Fatalf("raft info leaked at slog info: %q", buf.String())
	}
	n.Warn("heartbeat timeout", "term", 3)
	out := buf.String()
	for _, want := range []string{"level=WARN", "heartbeat timeout", "component=raft", "logger=transport", "peer=b", "term=3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("%q lacks %q", out, want)
		}
	}
	buf.Reset()
	n.StandardLogger(nil).Print("std line")
	if buf.Len() != 0 {
		t.Fatalf("standard logger line at info leaked: %q", buf.String())
	}
	setClosing(l)
	n.Error("use of closed network connection")
	if buf.Len() != 0 {
		t.Fatalf("error while closing not demoted: %q", buf.String())
	}
	newHclog(nil).Error("discarded") // nil logger: no panic
}

// TestPeerTroubleIsAWarning: raft's errors about reaching a peer (a voter
// that left, restarts or died) are warnings; its errors about this node's
// own state stay errors.
func TestPeerTroubleIsAWarning(t *testing.T) {
	var buf bytes.Buffer
	l := newHclog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for msg := range peerTrouble {
		buf.Reset()
		l.Error(msg, "peer", "127.0.0.1:7947", "error", "connection lost")
		if out := buf.String(); !strings.Contains(out, "level=WARN") {
			t.Errorf("%q logged as %q, want WARN", msg, out)
		}
	}
	buf.Reset()
	l.Error("failed to persist vote", "error", "disk full")
	if out := buf.String(); !strings.Contains(out, "level=ERROR") {
		t.Errorf("an error of this node's own logged as %q, want ERROR", out)
	}
}
