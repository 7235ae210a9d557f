package mesh

import (
	"errors"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// Job names are per tenant (issue 37, item 2; docs/operating/security.md,
// "Job names are per tenant"). A client names its job by its short name
// ("train"); the cluster keeps it under an internal name qualified by the
// tenant ("@vision/train"), so that tenant vision's "train" and tenant
// nlp's "train" are two jobs. The default tenant's jobs keep their bare
// names.
//
// The translation happens where a request enters the cluster, once: the
// control handler (handle: qualifyRequest before the method, display on
// its answer and its error) and a worker's data-stream Open
// (workerHost.StreamJob). A forwarded request carries the internal name
// already. Past the entry, everything (the leader, the state machine,
// workers, metrics, the audit log) knows the internal name only.
//
// A client may not give a name starting with "@" (an administrator's way
// to address another tenant's job: "@nlp/train"); nodes and
// administrators of the default tenant see and give internal names.
// Capabilities and checkpoint MACs are derived from the job's tenant and
// short name (shortJobName), as before job names were per tenant.

// tenantPrefix is the prefix of tenant's jobs' internal names.
func tenantPrefix(tenant string) string { return "@" + tenant + "/" }

// qualifyJobName is the internal name of the job p names name ("" stays
// "": no job named). p's tenant's short names are qualified; an
// administrator's "@tenant/name" is kept.
func qualifyJobName(p api.Principal, name string) string {
	if name == "" || p.Tenant == "" || p.Node || (p.Admin && strings.HasPrefix(name, "@")) {
		return name
	}
	return tenantPrefix(p.Tenant) + name
}

// resolveJobName is the internal name of the job p names given, by
// this node's replica: qualified (qualifyJobName), unless p's tenant has
// no job of the qualified name and either has one of the bare name (made
// before names were per tenant, or while a server of an older release
// was in the cluster) or the cluster is below ProtocolTenantNames (a
// worker of the older release would look the bare name up). The leader
// checks whatever it becomes (checkJob).
func (n *Node) resolveJobName(p api.Principal, given string) string {
	levelOK := func() bool {
		return n.raft.Protocol() >= fsm.ProtocolTenantNames || n.clusterProtocol() >= fsm.ProtocolTenantNames
	}
	return resolveJobName(p, given, n.raft.JobTenant, levelOK)
}

// resolveJobName is Node.resolveJobName's rule, pure: tenantOf looks a
// job up (its tenant, whether it exists), levelOK says whether the
// cluster has reached ProtocolTenantNames.
func resolveJobName(p api.Principal, given string, tenantOf func(string) (string, bool), levelOK func() bool) string {
	q := qualifyJobName(p, given)
	if q == given || strings.HasPrefix(given, "@") {
		return q // a tenant's "@...": refused by the leader
	}
	if _, ok := tenantOf(q); ok {
		return q
	}
	if t, ok := tenantOf(given); ok && t == p.Tenant {
		return given // the tenant's job of the bare name
	}
	if !levelOK() {
		return given
	}
	return q
}

// displayJobName is the name p knows the job of internal name by: the
// short name for a job of p's tenant, the internal name otherwise.
func displayJobName(p api.Principal, name string) string {
	if p.Tenant == "" || p.Node {
		return name
	}
	return strings.TrimPrefix(name, tenantPrefix(p.Tenant))
}

// shortJobName is the short name of tenant's job of internal name name.
func shortJobName(tenant, name string) string {
	if tenant == "" {
		return name
	}
	return strings.TrimPrefix(name, tenantPrefix(tenant))
}

// nameTenant is the tenant an internal name says its job is of: t for
// "@t/rest", ok false for a bare name.
func nameTenant(name string) (tenant string, ok bool) {
	rest, has := strings.CutPrefix(name, "@")
	if !has {
		return "", false
	}
	t, short, found := strings.Cut(rest, "/")
	if !found || t == "" || short == "" {
		return "", false
	}
	return t, true
}

// checkGivenJobName refuses a job name a client gave (before
// qualification) that names no job: an administrator's "@..." must be
// "@tenant/name". A tenant's "@..." is qualified like any name, and the
// leader refuses it (checkJob: reservedJobName), where the refusal is
// audited.
func checkGivenJobName(p api.Principal, method, name string) error {
	if !p.Admin || !strings.HasPrefix(name, "@") {
		return nil
	}
	if _, ok := nameTenant(name); !ok {
		return transport.Errorf(transport.ErrInvalid, "%s: job %q: a name starting %q is \"@tenant/name\" (another tenant's job)", method, name, "@")
	}
	return nil
}

// reservedJobName reports whether p (not privileged) gave a name that
// is the cluster's to give: one starting "@" (another tenant's job's
// internal name), or "share~" (a share group's). job is the internal
// name.
func reservedJobName(p api.Principal, job string) bool {
	short := shortJobName(p.Tenant, job)
	return strings.HasPrefix(short, "@") || fsm.IsShareGroupName(short)
}

// errReservedName is the refusal of a name a client may not give.
func errReservedName(method string, p api.Principal, job string) error {
	short := shortJobName(p.Tenant, job)
	if fsm.IsShareGroupName(short) {
		return transport.Errorf(transport.ErrPermissionDenied, "%s: job %q: names starting %q are the cluster's share groups, for nodes and administrators only", method, short, "share~")
	}
	return transport.Errorf(transport.ErrPermissionDenied, "%s: job %q: names starting %q are the cluster's (an administrator names another tenant's job \"@tenant/name\"); choose another job name", method, short, "@")
}

// qualifyRequest is req with the job it names (api.JobNamed) under its
// internal name for p (resolve: Node.resolveJobName), or the refusal of
// the name p gave.
func qualifyRequest[Req any](p api.Principal, method string, req Req, resolve func(p api.Principal, given string) string) (Req, error) {
	j, ok := any(req).(api.JobNamed)
	if !ok || j.JobName() == "" {
		return req, nil
	}
	if err := checkGivenJobName(p, method, j.JobName()); err != nil {
		return req, err
	}
	q := resolve(p, j.JobName())
	if q == j.JobName() {
		return req, nil
	}
	var out any
	switch r := any(req).(type) {
	case api.DistributeRequest:
		r.Options.Name = q
		out = r
	case api.JobRequest:
		r.Job = q
		out = r
	case api.ReceiptsRequest:
		r.Job = q
		out = r
	case api.OffloadRequest:
		r.Job = q
		out = r
	case api.LeaseRequest:
		r.Job = q
		out = r
	case api.ProduceRequest:
		r.Job = q
		out = r
	case api.EndTaskRequest:
		r.Job = q
		out = r
	case api.HandBackRequest:
		r.Job = q
		out = r
	case api.DrainedRequest:
		r.Job = q
		out = r
	case api.FinishRequest:
		r.Job = q
		out = r
	case api.ShareStatsRequest:
		r.Job = q
		out = r
	case api.OpStatsRequest:
		r.Job = q
		out = r
	default:
		// A request naming a job this table does not know: refused rather
		// than acted on under the name as given (another tenant's).
		return req, transport.Errorf(transport.ErrInternal, "%s: the node cannot qualify this request's job name (%T)", method, req)
	}
	return out.(Req), nil
}

// displayAnswer is a method's answer as p sees it: its job names short
// for p's tenant's jobs (displayJobName).
func displayAnswer(p api.Principal, resp any) any {
	if p.Privileged() && p.Tenant == "" {
		return resp
	}
	switch r := resp.(type) {
	case api.JobInfo:
		return displayJobInfo(p, r)
	case []api.JobInfo:
		return displayJobInfos(p, r)
	case api.JobGetResponse:
		r.Job = displayJobInfo(p, r.Job)
		return r
	case api.WorkerShareStats:
		jobs := make([]api.JobShareStats, len(r.Jobs))
		for i, j := range r.Jobs {
			j.Job = displayJobName(p, j.Job)
			jobs[i] = j
		}
		r.Jobs = jobs
		return r
	case api.WorkerOpStats:
		tasks := make([]api.TaskOpStats, len(r.Tasks))
		for i, t := range r.Tasks {
			t.Job = displayJobName(p, t.Job)
			tasks[i] = t
		}
		r.Tasks = tasks
		return r
	}
	return resp
}

func displayJobInfo(p api.Principal, j api.JobInfo) api.JobInfo {
	j.Name = displayJobName(p, j.Name)
	if len(j.Autocache) > 0 {
		// An autocache decision is the prefix's, whichever job's worker
		// made it: another tenant's job is not named.
		ac := slices.Clone(j.Autocache)
		for i, a := range ac {
			if d := a.Decision; d != nil {
				dd := *d
				dd.Job = displayJobName(p, d.Job)
				if !p.Privileged() && !ownJob(p, d.Job) {
					dd.Job = ""
				}
				ac[i].Decision = &dd
			}
		}
		j.Autocache = ac
	}
	return j
}

func displayJobInfos(p api.Principal, js []api.JobInfo) []api.JobInfo {
	if js == nil {
		return nil
	}
	out := make([]api.JobInfo, len(js))
	for i, j := range js {
		out[i] = displayJobInfo(p, j)
	}
	return out
}

// displayError is err as p sees it: the internal names of p's tenant's
// jobs in its text short, its code kept.
func displayError(p api.Principal, err error) error {
	if err == nil || p.Tenant == "" || p.Node {
		return err
	}
	msg := err.Error()
	if !strings.Contains(msg, tenantPrefix(p.Tenant)) {
		return err
	}
	var e *transport.Error
	if errors.As(err, &e) {
		if e != err {
			// As the transport answers a wrapped *Error: its code, the
			// whole text.
			return &transport.Error{Code: e.Code, Message: displayText(p, msg)}
		}
		return &transport.Error{Code: e.Code, Message: displayText(p, e.Message)}
	}
	return errors.New(displayText(p, msg))
}

// displayText is an error's text with the internal names of p's
// tenant's jobs short, where a name starts: after a quote (%q, as errors
// name jobs) or a space.
func displayText(p api.Principal, msg string) string {
	prefix := tenantPrefix(p.Tenant)
	msg = strings.ReplaceAll(msg, `"`+prefix, `"`)
	return strings.ReplaceAll(msg, " "+prefix, " ")
}

// qualified reports whether name is a tenant's job's internal name
// ("@tenant/name").
func qualified(name string) bool {
	_, ok := nameTenant(name)
	return ok
}

// ownJob reports whether the job of internal name name is p's tenant's
// by its name.
func ownJob(p api.Principal, name string) bool {
	if p.Tenant == "" {
		return !strings.HasPrefix(name, "@")
	}
	return strings.HasPrefix(name, tenantPrefix(p.Tenant))
}
