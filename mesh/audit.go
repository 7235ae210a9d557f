package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// audited are the control actions the leader logs, each once, with its
// principal, tenant, job and outcome (docs/operating/security.md, "Audit
// log"). The data plane's frequent requests (heartbeats, leases,
// finishes, receipts) are logged only when refused for who made them.
var audited = map[string]bool{
	api.MethodDistribute: true, api.MethodDetach: true, api.MethodJobs: true, api.MethodJobGet: true,
	api.MethodPut: true, api.MethodGet: true, api.MethodOffload: true, api.MethodEndTask: true,
	api.MethodTokenCreate: true, api.MethodTokenRevoke: true,
}

// Refused requests are the client's to repeat at will, each with a job
// name of its choosing: their audit lines are rate-limited per principal
// (auditBurst a window of logInterval, then counted: one summary line per
// principal and window, "audit: refused requests left out", with the
// count), and the strings a client chose are cut (logString). Successful
// control actions are all logged.
const (
	// auditBurst is how many audit lines of refused requests one
	// principal gets per logInterval before they are only counted.
	auditBurst = 20
	// auditMaxPrincipals bounds the principals whose refusals are
	// counted at once (then the least recently refused is summarized and
	// forgotten).
	auditMaxPrincipals = 256
	// maxAuditErr bounds an audit line's error text.
	maxAuditErr = 512
)

// auditLimit is the rate limiter of refused requests' audit lines
// (loglimit.go's, one cause per principal).
type auditLimit struct {
	mu         sync.Mutex
	lim        *logLimiter
	suppressed atomic.Int64 // since the node started
}

func newAuditLimit() *auditLimit {
	return &auditLimit{lim: newLogLimiter(auditBurst, logInterval, auditMaxPrincipals)}
}

// AuditSuppressed is how many audit lines of refused requests the node
// has left out (counted in the summaries) since it started.
func (n *Node) AuditSuppressed() int64 { return n.auditLim.suppressed.Load() }

// audit logs a control action the leader answered (err: its outcome).
func (n *Node) audit(ctx context.Context, method string, req any, err error) {
	denied := errors.Is(err, transport.ErrPermissionDenied)
	if !audited[method] && !denied {
		return
	}
	p := principal(ctx)
	if err != nil {
		now := time.Now()
		a := n.auditLim
		a.mu.Lock()
		ok, sums := a.lim.allow(p.Name, now, p)
		a.mu.Unlock()
		n.writeAuditSummaries(sums)
		if !ok {
			a.suppressed.Add(1)
			return
		}
	}
	job := ""
	if j, ok := req.(api.JobNamed); ok {
		job = j.JobName()
	}
	outcome := "ok"
	switch {
	case denied:
		outcome = "denied"
	case err != nil:
		outcome = "error"
	}
	attrs := []any{"method", method, "principal", p.Name, "tenant", p.Tenant, "admin", p.Admin, "job", logString(job), "outcome", outcome}
	if err != nil {
		attrs = append(attrs, "err", cutString(err.Error(), maxAuditErr))
	}
	n.log.Info("audit", attrs...)
}

// writeAuditSummaries writes one line per principal whose refused
// requests' audit lines were left out in a window.
func (n *Node) writeAuditSummaries(sums []logSummary) {
	for _, s := range sums {
		p, _ := s.Data.(api.Principal)
		n.log.Info("audit: refused requests left out", "principal", p.Name, "tenant", p.Tenant, "suppressed", s.Suppressed, "since", s.Since, "until", s.Until)
	}
}

// flushAudit writes the audit summaries due at now (all: every pending
// one, when the node stops).
func (n *Node) flushAudit(now time.Time, all bool) {
	n.auditLim.mu.Lock()
	sums := n.auditLim.lim.flush(now, all)
	n.auditLim.mu.Unlock()
	n.writeAuditSummaries(sums)
}

// maxLogString bounds a client-chosen string (a job or consumer name, an
// error naming one) in a log line.
const maxLogString = 128

// logString is s as a log line may carry it when a client chose it: cut
// to maxLogString bytes (valid UTF-8), saying how many more it had. The
// node's slog handler quotes it (text: strconv.Quote when it holds
// spaces, quotes, control characters or line breaks; JSON: escaped), so
// a name cannot forge a line or a field.
func logString(s string) string { return cutString(s, maxLogString) }

// cutString is s cut to n bytes (valid UTF-8), saying how many more it
// had.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…(+%d bytes)", strings.ToValidUTF8(s[:n], ""), len(s)-n)
}
