package mesh

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A script of log lines against a limiter with burst 2, interval 10s and
// room for 2 causes: each step is a line of a cause at a second (or a
// flush), and says which lines are written and which summaries come due.
func TestLogLimiter(t *testing.T) {
	type step struct {
		at    int    // seconds
		key   string // "" flushes (ended windows); "*" flushes all
		write bool   // the line is written
		sums  string // summaries due: "key:count:from-to" separated by spaces
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"burst then counted, summary with the next line after the window", []step{
			{0, "a", true, ""}, {1, "a", true, ""}, {2, "a", false, ""}, {3, "a", false, ""},
			{9, "a", false, ""},
			// A new window after a flooded one counts every line: no new burst.
			{10, "a", false, "a:3:0-10"},
			{11, "a", false, ""},
			// A window with counted lines is summarized again...
			{20, "", false, "a:2:10-20"},
			// ...and after a quiet one (no lines) the cause is forgotten.
			{30, "", false, ""},
			{31, "a", true, ""}, {31, "a", true, ""}, {31, "a", false, ""},
		}},
		{"causes are counted apart", []step{
			{0, "a", true, ""}, {0, "a", true, ""}, {0, "b", true, ""}, {0, "a", false, ""},
			{0, "b", true, ""}, {0, "b", false, ""}, {0, "b", false, ""},
			{10, "", false, "a:1:0-10 b:2:0-10"},
		}},
		{"a window without counted lines brings the burst back", []step{
			{0, "a", true, ""}, {0, "a", true, ""}, {0, "a", false, ""},
			{10, "", false, "a:1:0-10"},
			{12, "a", false, ""}, // flooded window: counted
			{20, "", false, "a:1:10-20"},
			{25, "", false, ""}, // window [20,30) not over
			{30, "", false, ""}, // quiet window: forgotten
			{31, "a", true, ""}, {32, "a", true, ""},
		}},
		{"a few lines never make a summary", []step{
			{0, "a", true, ""}, {5, "a", true, ""}, {10, "a", true, ""}, {15, "a", true, ""},
			{30, "*", false, ""},
		}},
		{"flush all writes pending counts at once", []step{
			{0, "a", true, ""}, {0, "a", true, ""}, {0, "a", false, ""}, {1, "a", false, ""},
			{3, "*", false, "a:2:0-3"},
			{4, "*", false, ""},
		}},
		{"past maxKeys the least recently seen cause goes, its count first", []step{
			{0, "a", true, ""}, {0, "a", true, ""}, {0, "a", false, ""},
			{1, "b", true, ""},
			{2, "a", false, ""},       // a is now the most recent
			{3, "c", true, ""},        // b goes: nothing counted, no summary
			{4, "b", true, "a:2:0-4"}, // a goes now, with its count
			{5, "*", false, ""},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogLimiter(2, 10*time.Second, 2)
			t0 := time.Unix(1000, 0)
			for i, s := range tc.steps {
				now := t0.Add(time.Duration(s.at) * time.Second)
				var (
					wrote bool
					sums  []logSummary
				)
				switch s.key {
				case "":
					sums = l.flush(now, false)
				case "*":
					sums = l.flush(now, true)
				default:
					wrote, sums = l.allow(s.key, now, s.key)
				}
				if wrote != s.write {
					t.Errorf("step %d (%+v): written %v, want %v", i, s, wrote, s.write)
				}
				var got []string
				for _, sum := range sums {
					if sum.Data != sum.Key {
						t.Errorf("step %d: summary of %s carries %v", i, sum.Key, sum.Data)
					}
					got = append(got, fmt.Sprintf("%s:%d:%d-%d", sum.Key, sum.Suppressed,
						sum.Since.Sub(t0)/time.Second, sum.Until.Sub(t0)/time.Second))
				}
				if g := strings.Join(got, " "); g != s.sums {
					t.Errorf("step %d (%+v): summaries %q, want %q", i, s, g, s.sums)
				}
				if l.tracked() > 2 {
					t.Fatalf("step %d: %d causes tracked, bound is 2", i, l.tracked())
				}
			}
		})
	}
}

// However many distinct causes arrive, the limiter holds at most maxKeys.
func TestLogLimiterKeyBound(t *testing.T) {
	l := newLogLimiter(1, time.Second, 16)
	now := time.Unix(0, 0)
	for i := range 10000 {
		if ok, _ := l.allow(fmt.Sprint("cause ", i), now, nil); !ok {
			t.Fatalf("first line of cause %d not written", i)
		}
	}
	if l.tracked() != 16 {
		t.Fatalf("%d causes tracked, want 16", l.tracked())
	}
}

func TestLogSummaryText(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		n    int
		d    time.Duration
		want string
	}{
		{1, 10 * time.Second, "msg type not supported (1 more like this in the last 10s)"},
		{1234, 10 * time.Second, "msg type not supported (1,234 more like this in the last 10s)"},
		{1234567, 20400 * time.Millisecond, "msg type not supported (1,234,567 more like this in the last 20s)"},
		{999, 100 * time.Millisecond, "msg type not supported (999 more like this in the last 1s)"},
	} {
		s := logSummary{Suppressed: tc.n, Since: t0, Until: t0.Add(tc.d)}
		if got := s.Text("msg type not supported"); got != tc.want {
			t.Errorf("%d in %s: %q, want %q", tc.n, tc.d, got, tc.want)
		}
	}
}

func TestLogCauseOf(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"msg type (173) not supported from=127.0.0.1:41054", "msg type not supported"},
		{"Failed to decode ping request: msgpack decode error [pos 3]: invalid byte", "Failed to decode ping request"},
		{"Compound request had 31 truncated messages from=127.0.0.1:48494", "Compound request had truncated messages"},
		{"Got invalid checksum for UDP packet: 109dc09f, 6a3e3e29", "Got invalid checksum for UDP packet"},
		{`discarding packet with unacceptable label "a b: c \" d": from=127.0.0.1:1`, "discarding packet with unacceptable label"},
		{"Got ping for unexpected node 'n7' from=127.0.0.1:1", "Got ping for unexpected node"},
		{"Failed to send gossip to 127.0.0.1:7946: write: refused", "Failed to send gossip to"},
		{"failed to appendEntries to", "failed to appendEntries to"},
		{"stream of unknown kind reset", "stream of unknown kind reset"},
		{"one two three four five six seven eight nine ten", "one two three four five six seven eight"},
		{"", ""},
	} {
		if got := logCauseOf(tc.msg); got != tc.want {
			t.Errorf("logCauseOf(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// The node's handler: WARN lines of one cause past the burst become one
// summary line; the libraries' errors while the node closes go to DEBUG,
// and only then.
func TestLimitedHandler(t *testing.T) {
	var buf bytes.Buffer
	closing := false
	log, logs := newNodeLogs(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		func() bool { return closing })
	now := time.Unix(1000, 0)
	logs.now = func() time.Time { return now }
	log = log.With("node", "n1")

	tr := log.With("component", "transport")
	for i := range 100 {
		tr.Warn("stream reset: listener closed or backlog full", "kind", i)
	}
	ml := newStdLogger(log, "memberlist")
	for i := range 100 {
		ml.Printf("[ERR] memberlist: msg type (%d) not supported from=127.0.0.1:5", i)
	}
	for range 10 {
		log.Info("member joined") // INFO is not limited
	}
	if got := strings.Count(buf.String(), "\n"); got != logBurst*2+10 {
		t.Fatalf("%d lines, want %d:\n%s", got, logBurst*2+10, buf.String())
	}
	buf.Reset()
	now = now.Add(logInterval)
	logs.flush(now, false)
	out := buf.String()
	for _, want := range []string{
		`level=WARN msg="stream reset: listener closed or backlog full (97 more like this in the last 10s)" node=n1 component=transport suppressed=97`,
		`level=ERROR msg="msg type not supported (97 more like this in the last 10s)" node=n1 component=memberlist suppressed=97`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summaries lack %q:\n%s", want, out)
		}
	}

	buf.Reset()
	ml.Printf("[ERR] memberlist: Error reading UDP packet: use of closed network connection")
	log.With("component", "raft").Error("failed to appendEntries to", "peer", "n2")
	if got := strings.Count(buf.String(), "level=ERROR"); got != 2 {
		t.Fatalf("%d ERROR lines from the libraries in normal operation, want 2:\n%s", got, buf.String())
	}
	buf.Reset()
	closing = true
	ml.Printf("[ERR] memberlist: Error reading UDP packet: use of closed network connection")
	log.With("component", "raft").Error("failed to heartbeat to", "peer", "n2")
	log.With("component", "transport").Warn("accept connections stopped")
	if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "accept connections stopped") {
		t.Fatalf("while closing, want only the transport's WARN (the libraries' at DEBUG, off):\n%s", out)
	}
}
