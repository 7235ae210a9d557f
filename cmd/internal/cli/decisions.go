package cli

import (
	"context"
	"log/slog"

	"github.com/feedmesh/feedmesh/client"
)

// WithDecisions wraps h, a handler meant to show records at level and
// above, so that it also shows the client's one INFO line of a job's
// offload and workers decision (marked client.DecisionKey): `feedmesh
// read` shows warnings and that line, and so does the Python package's log
// at its default level.
func WithDecisions(h slog.Handler, level slog.Level) slog.Handler {
	return decisionHandler{h: h, level: level}
}

type decisionHandler struct {
	h     slog.Handler
	level slog.Level
}

func (d decisionHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= min(d.level, slog.LevelInfo)
}

func (d decisionHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= d.level {
		return d.h.Handle(ctx, r)
	}
	decision := false
	r.Attrs(func(a slog.Attr) bool {
		decision = a.Key == client.DecisionKey
		return !decision
	})
	if !decision || r.Level < slog.LevelInfo {
		return nil
	}
	return d.h.Handle(ctx, r)
}

func (d decisionHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return decisionHandler{h: d.h.WithAttrs(as), level: d.level}
}

func (d decisionHandler) WithGroup(name string) slog.Handler {
	return decisionHandler{h: d.h.WithGroup(name), level: d.level}
}
