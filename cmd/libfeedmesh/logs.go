package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/feedmesh/feedmesh/client"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The clients' logs go to the caller, not to stderr: each record is kept
// in a bounded buffer that the caller drains with fm_logs (the Python
// package hands them to Python's logging, logger "feedmesh", where the
// application's own configuration decides what is shown). A counter in C
// memory (fm_log_seq) counts the records kept, so that a caller can see
// that there are some with a read of memory, no call.

// maxLogRecords bounds the records kept until drained; older ones are
// dropped first, and the next drain says how many.
const maxLogRecords = 1024

// logRecord is a record as fm_logs hands it out.
type logRecord struct {
	// Level is slog's: -4 debug, 0 info, 4 warn, 8 error.
	Level int    `json:"level"`
	Msg   string `json:"msg"`
}

var logs struct {
	mu      sync.Mutex
	records []logRecord
	dropped int
	seq     *C.int64_t // C memory: records kept so far
}

func init() {
	logs.seq = (*C.int64_t)(C.calloc(1, 8))
}

// keepLog keeps a record for the caller.
func keepLog(r logRecord) {
	logs.mu.Lock()
	if len(logs.records) >= maxLogRecords {
		logs.records = logs.records[1:]
		logs.dropped++
	}
	logs.records = append(logs.records, r)
	logs.mu.Unlock()
	atomic.AddInt64((*int64)(unsafe.Pointer(logs.seq)), 1)
}

// takeLogs returns the records kept and forgets them.
func takeLogs() []logRecord {
	logs.mu.Lock()
	defer logs.mu.Unlock()
	out := logs.records
	if logs.dropped > 0 {
		out = append([]logRecord{{Level: int(slog.LevelWarn), Msg: fmt.Sprintf("feedmesh: %d log records were dropped (more than %d between two drains)", logs.dropped, maxLogRecords)}}, out...)
		logs.dropped = 0
	}
	logs.records = nil
	return out
}

// callerHandler is the clients' slog.Handler: records at level or above
// are kept for fm_logs, as one line: the message, then the attributes as
// key=value. With decisions, the client's one INFO line of a job's
// offload and workers decision (marked client.DecisionKey) is kept too,
// below level.
type callerHandler struct {
	level     slog.Leveler
	decisions bool
	attrs     string // preformatted " key=value" of WithAttrs
}

func (h *callerHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level() || h.decisions && l >= slog.LevelInfo
}

func (h *callerHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level < h.level.Level() && !(h.decisions && r.Level >= slog.LevelInfo && isDecision(r)) {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, "", a)
		return true
	})
	keepLog(logRecord{Level: int(r.Level), Msg: b.String()})
	return nil
}

func (h *callerHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		appendAttr(&b, "", a)
	}
	return &callerHandler{level: h.level, decisions: h.decisions, attrs: b.String()}
}

// isDecision reports whether r is the client's decision line.
func isDecision(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == client.DecisionKey
		return !found
	})
	return found
}

// WithGroup: the clients use no groups; a group's attributes are written
// with its name as a prefix all the same.
func (h *callerHandler) WithGroup(name string) slog.Handler {
	return &groupHandler{h: h, prefix: name + "."}
}

type groupHandler struct {
	h      *callerHandler
	prefix string
}

func (g *groupHandler) Enabled(ctx context.Context, l slog.Level) bool { return g.h.Enabled(ctx, l) }
func (g *groupHandler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, g.prefix, a)
		return true
	})
	nr := slog.NewRecord(r.Time, r.Level, r.Message+b.String(), r.PC)
	return g.h.Handle(ctx, nr)
}
func (g *groupHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(g.h.attrs)
	for _, a := range as {
		appendAttr(&b, g.prefix, a)
	}
	return &groupHandler{h: &callerHandler{level: g.h.level, attrs: b.String()}, prefix: g.prefix}
}
func (g *groupHandler) WithGroup(name string) slog.Handler {
	return &groupHandler{h: g.h, prefix: g.prefix + name + "."}
}

// appendAttr writes " key=value" (the value quoted when it has spaces).
func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			appendAttr(b, prefix+a.Key+".", g)
		}
		return
	}
	v := a.Value.String()
	if strings.ContainsAny(v, " \t\n\"=") || v == "" {
		v = fmt.Sprintf("%q", v)
	}
	fmt.Fprintf(b, " %s%s=%s", prefix, a.Key, v)
}

// fm_log_seq returns the address of the count of log records kept so far
// (an int64 in C memory, valid for the process's life): when it changed
// since the last look, fm_logs has records.
//
//export fm_log_seq
func fm_log_seq() unsafe.Pointer { return unsafe.Pointer(logs.seq) }

// fm_logs sets *out to the log records kept since the last call, as a
// JSON array of {"level", "msg"} (C memory, fm_free it), and forgets them.
//
//export fm_logs
func fm_logs(out **C.char, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	js, err := json.Marshal(takeLogs())
	if err != nil {
		return fail(errOut, codeOther, err)
	}
	*out = C.CString(string(js))
	return codeOK
}
