package raftnode

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter bridges hashicorp/raft's hclog.Logger to slog. Raft is
// chatty at info (every state change, every snapshot), so its Info goes to
// slog Debug and its Trace/Debug below that; Warn and Error stay as they are.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level hclog.Level // raft-side floor, settable through SetLevel
	// closing, shared by every logger derived from this one, is set when
	// the Node starts closing: from then on raft's errors (connections torn
	// down under it, mostly) are expected and go to slog Debug.
	closing *atomic.Bool
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// levelTrace is below slog.LevelDebug, for raft's trace output.
const levelTrace = slog.LevelDebug - 4

func newHclog(l *slog.Logger) hclog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &hclogAdapter{l: l.With("component", "raft"), level: hclog.Trace, closing: new(atomic.Bool)}
}

// setClosing marks the node as closing (see closing).
func setClosing(l hclog.Logger) {
	if a, ok := l.(*hclogAdapter); ok {
		a.closing.Store(true)
	}
}

func (a *hclogAdapter) slogLevel(level hclog.Level) slog.Level {
	if a.closing.Load() && level > hclog.Info {
		return slog.LevelDebug
	}
	return slogLevel(level)
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug, hclog.Info, hclog.NoLevel:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	return level >= a.level && a.l.Enabled(context.Background(), a.slogLevel(level))
}

// peerTrouble are raft's errors about reaching one peer (the leader
// replicating to it, a candidate asking for its vote, a peer's connection
// torn down under a request it was sending or awaiting). A peer that
// leaves gracefully, restarts or dies makes them, again at every backoff,
// while this node is fine; gossip reports the peer itself. They are warnings:
// ERROR is for this node's own failures (its log store, its snapshots),
// which keep raft's level.
var peerTrouble = map[string]bool{
	"failed to start pipeline replication to": true,
	"failed to appendEntries to":              true,
	"failed to heartbeat to":                  true,
	"failed to pipeline appendEntries":        true,
	"failed to send snapshot to":              true,
	"failed to make requestVote RPC":          true,
	"failed to decode incoming command":       true,
	"failed to flush response":                true,
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Error && peerTrouble[msg] {
		level = hclog.Warn
	}
	if level == hclog.Off || !a.enabled(level) {
		return
	}
	if a.name != "" {
		args = append([]any{"logger", a.name}, args...)
	}
	a.l.Log(context.Background(), a.slogLevel(level), msg, append(append([]any{}, a.args...), args...)...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }

func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }

func (a *hclogAdapter) Info(msg string, args ...any) { a.Log(hclog.Info, msg, args...) }

func (a *hclogAdapter) Warn(msg string, args ...any) { a.Log(hclog.Warn, msg, args...) }

func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }

func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }

func (a *hclogAdapter) IsInfo() bool { return a.enabled(hclog.Info) }

func (a *hclogAdapter) IsWarn() bool { return a.enabled(hclog.Warn) }

func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return append([]any{}, a.args...) }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any{}, a.args...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel only affects this adapter value; raft does not call it.
func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level = level }

func (a *hclogAdapter) GetLevel() hclog.Level { return a.level }

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{a}
}

// lineWriter logs each write (a standard-library log line) at raft's Info.
type lineWriter struct{ a *hclogAdapter }

func (w lineWriter) Write(p []byte) (int, error) {
	w.a.Info(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
