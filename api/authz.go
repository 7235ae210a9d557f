package api

// What a node checks of a request's caller (issue 36): under mutual TLS
// every caller proves who it is (transport.PeerFromContext), and the
// requests below say what the check needs.

// Forwardable is a request that a node may forward to the leader. A
// forwarded request is answered there without a second check of its
// caller (the forwarding node checked it), so only a node may send one.
type Forwardable interface {
	WasForwarded() bool
	// ForwardedFor is the principal the forwarding node took the request
	// from (nil from a node of an older release).
	ForwardedFor() *Principal
	// WithCaller is the request, forwarded for p.
	WithCaller(p *Principal) any
}

// Principal is who makes a request (docs/operating/security.md, "Tenants
// and permissions"): under mutual TLS the identity its client certificate
// proves (a SPIFFE ID) with the tenant and administrator's unit the
// certificate carries, or a node of the cluster; in dev mode the one
// anonymous principal, an administrator. A node forwarding a request to
// the leader sends its caller's principal along (Caller).
type Principal struct {
	// Name is the SPIFFE ID, or "anonymous" in dev mode.
	Name string `cbor:"1,keyasint" json:"name"`
	// Tenant is the principal's tenant, "" for the default tenant.
	Tenant string `cbor:"2,keyasint,omitempty" json:"tenant,omitempty"`
	// Admin: an administrator (every tenant's jobs, the KV store).
	Admin bool `cbor:"3,keyasint,omitempty" json:"admin,omitempty"`
	// Node: a node of the cluster (its own worker requests, forwarding).
	Node bool `cbor:"4,keyasint,omitempty" json:"node,omitempty"`
}

// Privileged reports whether p may act on every tenant's jobs: an
// administrator or a node.
func (p Principal) Privileged() bool { return p.Admin || p.Node }

// MayActOn reports whether p may act on a job (or dataset) of tenant:
// its own tenant's, or any if p is privileged.
func (p Principal) MayActOn(tenant string) bool { return p.Privileged() || p.Tenant == tenant }

// JobNamed is a request about one job (for authorization and the audit
// log).
type JobNamed interface{ JobName() string }

// WorkerRequest is a request a worker makes in its own name: a node acts
// only in its own name, and a consumer's local worker
// (jobspec.LocalWorkerOf) in its consumer's.
type WorkerRequest interface{ WorkerName() string }

func (r DistributeRequest) WasForwarded() bool { return r.Forwarded }
func (r JobRequest) WasForwarded() bool        { return r.Forwarded }
func (r ReceiptsRequest) WasForwarded() bool   { return r.Forwarded }
func (r OffloadRequest) WasForwarded() bool    { return r.Forwarded }
func (r PutRequest) WasForwarded() bool        { return r.Forwarded }
func (r GetRequest) WasForwarded() bool        { return r.Forwarded }
func (r LeaseRequest) WasForwarded() bool      { return r.Forwarded }
func (r ProduceRequest) WasForwarded() bool    { return r.Forwarded }
func (r EndTaskRequest) WasForwarded() bool    { return r.Forwarded }
func (r HandBackRequest) WasForwarded() bool   { return r.Forwarded }
func (r DrainedRequest) WasForwarded() bool    { return r.Forwarded }
func (r FinishRequest) WasForwarded() bool     { return r.Forwarded }

func (r LeaseRequest) WorkerName() string    { return r.Worker }
func (r ProduceRequest) WorkerName() string  { return r.Worker }
func (r EndTaskRequest) WorkerName() string  { return r.Worker }
func (r HandBackRequest) WorkerName() string { return r.Worker }
func (r DrainedRequest) WorkerName() string  { return r.Worker }
func (r FinishRequest) WorkerName() string   { return r.Worker }

func (r DistributeRequest) ForwardedFor() *Principal { return r.Caller }
func (r JobRequest) ForwardedFor() *Principal        { return r.Caller }
func (r ReceiptsRequest) ForwardedFor() *Principal   { return r.Caller }
func (r OffloadRequest) ForwardedFor() *Principal    { return r.Caller }
func (r PutRequest) ForwardedFor() *Principal        { return r.Caller }
func (r GetRequest) ForwardedFor() *Principal        { return r.Caller }
func (r LeaseRequest) ForwardedFor() *Principal      { return r.Caller }
func (r ProduceRequest) ForwardedFor() *Principal    { return r.Caller }
func (r EndTaskRequest) ForwardedFor() *Principal    { return r.Caller }
func (r HandBackRequest) ForwardedFor() *Principal   { return r.Caller }
func (r DrainedRequest) ForwardedFor() *Principal    { return r.Caller }
func (r FinishRequest) ForwardedFor() *Principal     { return r.Caller }

func (r DistributeRequest) WithCaller(p *Principal) any { r.Caller = p; return r }
func (r JobRequest) WithCaller(p *Principal) any        { r.Caller = p; return r }
func (r ReceiptsRequest) WithCaller(p *Principal) any   { r.Caller = p; return r }
func (r OffloadRequest) WithCaller(p *Principal) any    { r.Caller = p; return r }
func (r PutRequest) WithCaller(p *Principal) any        { r.Caller = p; return r }
func (r GetRequest) WithCaller(p *Principal) any        { r.Caller = p; return r }
func (r LeaseRequest) WithCaller(p *Principal) any      { r.Caller = p; return r }
func (r ProduceRequest) WithCaller(p *Principal) any    { r.Caller = p; return r }
func (r EndTaskRequest) WithCaller(p *Principal) any    { r.Caller = p; return r }
func (r HandBackRequest) WithCaller(p *Principal) any   { r.Caller = p; return r }
func (r DrainedRequest) WithCaller(p *Principal) any    { r.Caller = p; return r }
func (r FinishRequest) WithCaller(p *Principal) any     { r.Caller = p; return r }

func (r DistributeRequest) JobName() string { return r.Options.Name }
func (r JobRequest) JobName() string        { return r.Job }
func (r ReceiptsRequest) JobName() string   { return r.Job }
func (r OffloadRequest) JobName() string    { return r.Job }
func (r LeaseRequest) JobName() string      { return r.Job }
func (r ProduceRequest) JobName() string    { return r.Job }
func (r EndTaskRequest) JobName() string    { return r.Job }
func (r HandBackRequest) JobName() string   { return r.Job }
func (r DrainedRequest) JobName() string    { return r.Job }
func (r FinishRequest) JobName() string     { return r.Job }
func (r ShareStatsRequest) JobName() string { return r.Job }
func (r OpStatsRequest) JobName() string    { return r.Job }
