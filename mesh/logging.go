package mesh

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// slogWriter turns memberlist's "[LEVEL] memberlist: msg" lines into slog
// records, so one logger receives everything a node says.
type slogWriter struct {
	log       *slog.Logger
	component string
}

func newStdLogger(l *slog.Logger, component string) *log.Logger {
	return log.New(&slogWriter{log: l, component: component}, "", 0)
}

func (w *slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{
		"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo,
		"[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError, "[ERROR]": slog.LevelError,
	} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = l
			line = bytes.TrimSpace(line[len(prefix):])
			break
		}
	}
	ctx := context.Background()
	if w.log.Enabled(ctx, level) {
		w.log.Log(ctx, level, string(line), "component", w.component)
	}
	return len(p), nil
}

// discardLogger is used when Config.Logger is nil.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
