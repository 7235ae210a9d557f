package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// audit logs a control action the leader answered (err: its outcome).
func (n *Node) audit(ctx context.Context, method string, req any, err error) {
	denied := errors.Is(err, transport.ErrPermissionDenied)
	if !audited[method] && !denied {
		return
	}
	p := principal(ctx)
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
	attrs := []any{"method", method, "principal", p.Name, "tenant", p.Tenant, "admin", p.Admin, "job", job, "outcome", outcome}
	if err != nil {
		attrs = append(attrs, "err", err.Error())
	}
	n.log.Info("audit", attrs...)
}

// maxLogString bounds a client-chosen string (a job or consumer name, an
// error naming one) in a log line.
const maxLogString = 128

// logString is s as a log line may carry it when a client chose it: cut
// to maxLogString bytes (valid UTF-8), saying how many more it had. The
// node's slog handler quotes it (text: strconv.Quote when it holds
// spaces, quotes, control characters or line breaks; JSON: escaped), so
// a name cannot forge a line or a field.
func logString(s string) string {
	if len(s) <= maxLogString {
		return s
	}
	return fmt.Sprintf("%s…(+%d bytes)", strings.ToValidUTF8(s[:maxLogString], ""), len(s)-maxLogString)
}
