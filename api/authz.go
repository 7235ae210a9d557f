package api

// What a node checks of a request's caller (issue 36): under mutual TLS
// every caller proves who it is (transport.PeerFromContext), and the
// requests below say what the check needs.

// Forwardable is a request that a node may forward to the leader. A
// forwarded request is answered there without a second check of its
// caller (the forwarding node checked it), so only a node may send one.
type Forwardable interface{ WasForwarded() bool }

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
