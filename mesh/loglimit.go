package mesh

import (
	"container/list"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate-limiting log lines per cause. A peer can make a node log once per
// datagram or stream it sends (random datagrams to the gossip port made
// memberlist log an ERROR for ~1 in 3), so the node writes the first few
// lines of each cause and then only counts them, writing one summary line
// per interval with the count. This file decides (pure: the time is an
// argument); logging.go applies it to the node's logger.

const (
	// logBurst is how many WARN/ERROR lines of one cause the node writes per
	// logInterval before it only counts them: a few examples of the values
	// a message carries (addresses, errors), then a count.
	logBurst = 3
	// logInterval is the window the burst and the summary lines refer to: a
	// cause that keeps firing gets one summary line per interval.
	logInterval = 10 * time.Second
	// logMaxCauses bounds the causes tracked at once, so a flood of distinct
	// messages cannot grow memory; past it the least recently seen cause is
	// forgotten (its pending count written first).
	logMaxCauses = 256
)

// logLimiter decides which log lines to write and which to count, per cause
// key. Within a window of interval from a cause's first line it allows
// burst lines and counts the rest; at the end of a window with counted lines
// it hands back a logSummary, and the next window counts every line (no new
// burst) so that a steady flood costs one summary line per interval. A
// window without counted lines brings the burst back. Not safe for
// concurrent use.
type logLimiter struct {
	burst    int
	interval time.Duration
	maxKeys  int
	causes   map[string]*list.Element // of *logCause
	lru      list.List                // most recently seen first
}

type logCause struct {
	key        string
	data       any // the caller's, from the cause's first line: handed back in summaries
	start      time.Time
	logged     int
	suppressed int
	flooding   bool // the previous window counted lines: no burst in this one
}

// logSummary says how many lines of a cause were left out, and when.
type logSummary struct {
	Key        string
	Data       any
	Suppressed int
	Since      time.Time
	Until      time.Time
}

func newLogLimiter(burst int, interval time.Duration, maxKeys int) *logLimiter {
	return &logLimiter{burst: burst, interval: interval, maxKeys: max(maxKeys, 1), causes: map[string]*list.Element{}}
}

// allow reports whether a line of cause key, at now, is to be written, and
// returns the summaries that are due: key's previous window, and a cause
// forgotten to make room for key. data is kept from a cause's first line.
func (l *logLimiter) allow(key string, now time.Time, data any) (bool, []logSummary) {
	var sums []logSummary
	e, ok := l.causes[key]
	if !ok {
		if len(l.causes) >= l.maxKeys {
			oldest := l.lru.Back()
			c := oldest.Value.(*logCause)
			if s, ok := c.roll(now); ok {
				sums = append(sums, s)
			}
			l.lru.Remove(oldest)
			delete(l.causes, c.key)
		}
		e = l.lru.PushFront(&logCause{key: key, data: data, start: now})
		l.causes[key] = e
	} else {
		l.lru.MoveToFront(e)
	}
	c := e.Value.(*logCause)
	if now.Sub(c.start) >= l.interval {
		if s, ok := c.roll(now); ok {
			sums = append(sums, s)
		}
	}
	if !c.flooding && c.logged < l.burst {
		c.logged++
		return true, sums
	}
	c.suppressed++
	return false, sums
}

// flush returns the summaries of the windows that have ended by now (all
// pending ones with all, when the node stops), least recently seen cause
// first, and forgets causes that were quiet for a whole window.
func (l *logLimiter) flush(now time.Time, all bool) []logSummary {
	var sums []logSummary
	for e := l.lru.Back(); e != nil; {
		next := e.Prev()
		c := e.Value.(*logCause)
		if all || now.Sub(c.start) >= l.interval {
			idle := c.logged == 0 && c.suppressed == 0
			if s, ok := c.roll(now); ok {
				sums = append(sums, s)
			}
			if idle {
				l.lru.Remove(e)
				delete(l.causes, c.key)
			}
		}
		e = next
	}
	return sums
}

// tracked is the number of causes held.
func (l *logLimiter) tracked() int { return len(l.causes) }

// roll ends c's window at now, returning its summary if it counted lines.
func (c *logCause) roll(now time.Time) (logSummary, bool) {
	s := logSummary{Key: c.key, Data: c.data, Suppressed: c.suppressed, Since: c.start, Until: now}
	c.flooding = c.suppressed > 0
	c.start, c.logged, c.suppressed = now, 0, 0
	return s, s.Suppressed > 0
}

// Text is the summary line: the cause, then "(1,234 more like this in the
// last 10s)".
func (s logSummary) Text(cause string) string {
	d := max(s.Until.Sub(s.Since).Round(time.Second), time.Second)
	return fmt.Sprintf("%s (%s more like this in the last %s)", cause, thousands(s.Suppressed), d)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// logCauseOf names the cause of a log message: its words up to the first
// one that ends with a colon (what follows is an error's text), leaving out
// the words that carry values (digits, quotes, key=value, brackets), at most
// maxCauseWords of them. The libraries' messages embed addresses, numbers
// and error texts ("msg type (173) not supported from=127.0.0.1:41054");
// every such line has the same cause ("msg type not supported").
func logCauseOf(msg string) string {
	const maxCauseWords = 8
	words := make([]string, 0, maxCauseWords)
	for w := range strings.FieldsSeq(dropQuoted(msg)) {
		last := strings.HasSuffix(w, ":")
		w = strings.TrimSuffix(w, ":")
		if w != "" && !strings.ContainsAny(w, "0123456789'\"`=()[]{}<>") {
			words = append(words, w)
		}
		if last || len(words) == maxCauseWords {
			break
		}
	}
	return strings.Join(words, " ")
}

// dropQuoted replaces every double-quoted part of s (as %q writes it, with
// backslash escapes; values from peers, which may hold spaces) by a quote.
func dropQuoted(s string) string {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i >= 0 {
		b.WriteString(s[:i])
		b.WriteByte('"')
		s = s[i+1:]
		j := 0
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		s = s[min(j+1, len(s)):]
		i = strings.IndexByte(s, '"')
	}
	b.WriteString(s)
	return b.String()
}
