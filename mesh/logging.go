package mesh

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// slogWriter turns memberlist's "[LEVEL] memberlist: msg" lines into slog
// records, so one logger receives everything a node says.
type slogWriter struct {
	log       *slog.Logger
	component string
}

func newStdLogger(l *slog.Logger, component string) *log.Logger {
	if h, ok := l.Handler().(*limitedHandler); ok {
		c := *h
		c.valuesInMessage = true
		l = slog.New(&c)
	}
	return log.New(&slogWriter{log: l, component: component}, "", 0)
}

var stdLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
}

func (w *slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, l := range stdLevels {
		if bytes.HasPrefix(line, []byte(l.prefix)) {
			level = l.level
			line = bytes.TrimSpace(line[len(l.prefix):])
			break
		}
	}
	// "memberlist: " repeats the component.
	line = bytes.TrimPrefix(line, []byte(w.component+": "))
	if level > slog.LevelDebug && bytes.Contains(line, []byte(notAdmittedYet)) {
		// memberlist warns of every alive message the admission refused
		// while it checks the member (admission.go): routine, not news.
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if w.log.Enabled(ctx, level) {
		w.log.Log(ctx, level, string(line), "component", w.component)
	}
	return len(p), nil
}

// discardLogger is used when Config.Logger is nil.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// nodeLogs is what every handler derived from a node's logger shares: the
// per-cause limiter (loglimit.go) and whether the node is closing.
type nodeLogs struct {
	// closing reports that the node is shutting down: then the libraries'
	// WARN and ERROR lines (connections torn down under memberlist and Raft,
	// peers leaving at the same time) are expected and go to DEBUG.
	closing func() bool
	now     func() time.Time

	mu  sync.Mutex
	lim *logLimiter
	// counts are the WARN and ERROR lines by level and component, written
	// or left out by the limiter (for the node's metrics), at most
	// maxLogCountKeys keys (then "other").
	counts map[LogCountKey]int64
}

// LogCountKey is a level and a component of Node.LogCounts.
type LogCountKey struct{ Level, Component string }

// maxLogCountKeys bounds nodeLogs.counts: components are the node's own
// (mesh, raft, memberlist, transport, …), but a bound costs nothing.
const maxLogCountKeys = 64

func (l *nodeLogs) count(level slog.Level, component string) {
	k := LogCountKey{level.String(), component}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[LogCountKey]int64{}
	}
	if _, ok := l.counts[k]; !ok && len(l.counts) >= maxLogCountKeys {
		k.Component = "other"
	}
	l.counts[k]++
}

// LogCounts returns how many WARN and ERROR lines the node has logged
// (or counted and left out) by level and component since it started;
// libraries' lines demoted to DEBUG while the node closes are not counted.
func (n *Node) LogCounts() map[LogCountKey]int64 {
	n.logs.mu.Lock()
	defer n.logs.mu.Unlock()
	return maps.Clone(n.logs.counts)
}

// limitedHandler is the node's slog.Handler: it demotes the libraries'
// errors while the node closes and writes WARN and ERROR lines through the
// per-cause limiter, with a summary line for those it leaves out.
type limitedHandler struct {
	inner     slog.Handler
	component string // from WithAttrs; else the record's own "component"
	logs      *nodeLogs
	// valuesInMessage is set for the standard-library loggers handed to
	// memberlist, whose messages embed addresses and error texts: their
	// cause is the message's leading words (logCauseOf). Other messages are
	// constant (values go in attributes) and are their own cause.
	valuesInMessage bool
}

// summaryRef is what the limiter keeps of a cause's first line to write
// its summaries.
type summaryRef struct {
	h         slog.Handler
	level     slog.Level
	cause     string
	component string // set when it came from the record, not the handler
}

// newNodeLogs wraps l's handler with the per-cause limiter.
func newNodeLogs(l *slog.Logger, closing func() bool) (*slog.Logger, *nodeLogs) {
	logs := &nodeLogs{closing: closing, now: time.Now, lim: newLogLimiter(logBurst, logInterval, logMaxCauses)}
	return slog.New(&limitedHandler{inner: l.Handler(), logs: logs}), logs
}

func (h *limitedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.inner.Handle(ctx, r)
	}
	component, fromRecord := h.component, false
	if component == "" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" {
				component, fromRecord = a.Value.String(), true
				return false
			}
			return true
		})
	}
	if (component == "memberlist" || component == "raft") && h.logs.closing() {
		if !h.inner.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
		return h.inner.Handle(ctx, r)
	}
	if component == "" {
		h.logs.count(r.Level, "mesh")
	} else {
		h.logs.count(r.Level, component)
	}
	cause := r.Message
	if h.valuesInMessage {
		cause = logCauseOf(r.Message)
	}
	key := r.Level.String() + " " + component + ": " + cause
	ref := &summaryRef{h: h.inner, level: r.Level, cause: cause}
	if fromRecord {
		ref.component = component
	}
	h.logs.mu.Lock()
	ok, sums := h.logs.lim.allow(key, h.logs.now(), ref)
	h.logs.mu.Unlock()
	writeSummaries(ctx, sums)
	if !ok {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(as)
	for _, a := range as {
		if a.Key == "component" {
			c.component = a.Value.String()
		}
	}
	return &c
}

func (h *limitedHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}

// flush writes the summaries due at now; with all, every pending one.
func (l *nodeLogs) flush(now time.Time, all bool) {
	l.mu.Lock()
	sums := l.lim.flush(now, all)
	l.mu.Unlock()
	writeSummaries(context.Background(), sums)
}

// writeSummaries writes one line per summary, at the level of the lines it
// counts, through the handler that wrote the cause's first line: "msg type
// not supported (1,234 more like this in the last 10s)", suppressed=1234.
func writeSummaries(ctx context.Context, sums []logSummary) {
	for _, s := range sums {
		ref := s.Data.(*summaryRef)
		if !ref.h.Enabled(ctx, ref.level) {
			continue
		}
		r := slog.NewRecord(s.Until, ref.level, s.Text(ref.cause), 0)
		if ref.component != "" {
			r.AddAttrs(slog.String("component", ref.component))
		}
		r.AddAttrs(slog.Int("suppressed", s.Suppressed))
		_ = ref.h.Handle(ctx, r)
	}
}

// logSummaryLoop writes the summaries of causes that went on past their
// burst, once per interval, until the node closes (shutdown writes the
// rest).
func (n *Node) logSummaryLoop() {
	defer n.wg.Done()
	t := time.NewTicker(logInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			n.logs.flush(now, false)
			n.flushAudit(now, false)
		}
	}
}
