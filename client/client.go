package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Sharding says how a job's data is divided among its workers (jobspec.Sharding;
// the zero value is the job's default).
type Sharding = jobspec.Sharding

// The sharding policies (tf.data service's ShardingPolicy OFF, DYNAMIC, and
// a STATIC that assigns split i to worker i mod n).
const (
	Off     = jobspec.Off
	Dynamic = jobspec.Dynamic
	Static  = jobspec.Static
)

// The delivery guarantees of a DYNAMIC job (JobOptions.Delivery).
const (
	ExactlyOnce = jobspec.ExactlyOnce
	AtMostOnce  = jobspec.AtMostOnce
)

// Workers says how many nodes serve a job (JobOptions.Workers): AutoWorkers,
// AllWorkers or FixedWorkers(n).
type Workers = jobspec.Workers

// The worker choices that are not a count.
const (
	AutoWorkers = jobspec.AutoWorkers
	AllWorkers  = jobspec.AllWorkers
)

// FixedWorkers is a fixed count of n workers (JobOptions.Workers).
func FixedWorkers(n int) Workers { return jobspec.FixedWorkers(n) }

// The offload modes (JobOptions.Offload; a fixed local fraction is
// written as "0.3"). See client/offload.go and docs/jobs/offload.md.
const (
	OffloadAuto   = jobspec.OffloadAuto
	OffloadRemote = jobspec.OffloadRemote
	OffloadLocal  = jobspec.OffloadLocal
)

// JobOptions describe the job to create or join, and this consumer's
// choices in it: Name is required, every other field has a default (see
// jobspec.Options, the one schema of a job's options, which the wire
// carries as api.JobOptions). Distribute normalizes them once
// (NormalizeJobOptions).
type JobOptions = jobspec.Options

// Client talks to a feedmesh cluster through any of its nodes.
type Client struct {
	opts     Options
	pc       net.PacketConn
	tr       *transport.Transport
	codec    *transport.Codec
	pool     *batch.BufferPool // recycled batch buffers; nil: off
	profiles *profileStore     // offload auto's remembered profiles
	addr     string            // the node Dial was given

	mu    sync.Mutex
	nodes []string // known node addresses, the dialed one first
}

// BufferStats is what the client's recycling of batch buffers did
// (Options.RecycleBytes, Batch.Release).
type BufferStats struct {
	// HeldBytes are free buffers kept for reuse (at most RecycleBytes).
	HeldBytes int64 `json:"held_bytes"`
	// Reused counts batches received into a recycled buffer.
	Reused int64 `json:"reused"`
}

// BufferStats reports the recycling of batch buffers; zero when off.
func (c *Client) BufferStats() BufferStats {
	if c.pool == nil {
		return BufferStats{}
	}
	held, reused := c.pool.Stats()
	return BufferStats{HeldBytes: held, Reused: reused}
}

// Dial connects to the node at addr (its QUIC address, host:port) and
// learns the cluster's other nodes, to fail over to if addr dies.
func Dial(ctx context.Context, addr string, o Options) (*Client, error) {
	o = o.withDefaults()
	pc := o.PacketConn
	if pc == nil {
		udp, err := net.ListenUDP("udp", &net.UDPAddr{})
		if err != nil {
			return nil, err
		}
		pc = udp
	}
	c, err := dialOn(ctx, pc, addr, o)
	if err != nil {
		pc.Close() // the client's either way (Options.PacketConn)
	}
	return c, err
}

// dialOn is Dial over pc; on failure it closes what it started, not pc.
func dialOn(ctx context.Context, pc net.PacketConn, addr string, o Options) (*Client, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("node address %q: want host:port (the node's --port): %w", addr, err)
	}
	switch o.OffloadColocation {
	case "", OffloadColocationDetect, OffloadColocationIgnore:
	default:
		return nil, fmt.Errorf("Options.OffloadColocation %q: want %q (the default) or %q", o.OffloadColocation, OffloadColocationDetect, OffloadColocationIgnore)
	}
	tcfg := transport.DefaultConfig()
	if o.Transport != nil {
		tcfg = *o.Transport
	}
	tcfg.DataConns = min(16, max(tcfg.DataConns, o.StreamsPerWorker))
	tlsConf := o.TLS
	if tlsConf == nil {
		var err error
		if tlsConf, err = transport.ClientTLS("", "", ""); err != nil {
			return nil, err
		}
	}
	tr, err := transport.New(pc, nil, tlsConf, tcfg, o.Logger.With("component", "transport"))
	if err != nil {
		return nil, err
	}
	codec, err := transport.NewCodec(tcfg.MaxHeaderBytes, tcfg.MaxFrameBytes)
	if err != nil {
		tr.Close()
		return nil, err
	}
	c := &Client{opts: o, pc: pc, tr: tr, codec: codec, addr: addr, nodes: []string{addr}, profiles: profileStoreFor(o.OffloadProfiles)}
	if o.RecycleBytes > 0 {
		c.pool = batch.NewBufferPool(o.RecycleBytes)
	}
	if err := c.refreshNodes(ctx); err != nil {
		tr.Close()
		if unreachable(err) {
			return nil, fmt.Errorf("dial %s: the node did not answer (is a feedmesh node running there, and is %s its QUIC --port, not its --gossip-port?): %w", addr, addr, err)
		}
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

// refreshNodes asks a node for the member list.
func (c *Client) refreshNodes(ctx context.Context) error {
	var ms []api.Member
	if err := c.call(ctx, api.MethodMembers, struct{}{}, &ms); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.nodes[0]
	nodes := []string{first}
	for _, m := range ms {
		if m.Status == api.StatusAlive && m.Addr != "" && m.Addr != first {
			nodes = append(nodes, m.Addr)
		}
	}
	c.nodes = nodes
	return nil
}

// maxNodes bounds the node addresses a client keeps for failover.
const maxNodes = 64

// learnNodes adds the job's live workers, which are nodes, to the
// addresses control requests fail over to. The member list taken at Dial
// may be one node's (a client started while the cluster formed); without
// this, that node's death would leave the client nothing to call.
func (c *Client) learnNodes(ws []api.WorkerInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range ws {
		if w.Addr != "" && !w.Expired && len(c.nodes) < maxNodes && !slices.Contains(c.nodes, w.Addr) {
			c.nodes = append(c.nodes, w.Addr)
		}
	}
}

// call sends a control request to the first node that answers, moving a
// node that failed to the back of the list (failover).
func (c *Client) call(ctx context.Context, method string, req, resp any) error {
	ctx, cancel := context.WithTimeout(transport.WithToken(ctx, c.opts.Token), c.opts.RequestTimeout)
	defer cancel()
	c.mu.Lock()
	nodes := append([]string(nil), c.nodes...)
	c.mu.Unlock()
	var lastErr error
	for i, addr := range nodes {
		// Each attempt has all the time left: the server spends it (retrying
		// across leader changes) before it says "no quorum", and a dead node
		// fails fast enough through the transport's handshake and idle
		// timeouts to leave time for the next one.
		err := transport.Call(ctx, c.tr, c.codec, addr, method, req, resp)
		if err == nil {
			return nil
		}
		if !unreachable(err) || ctx.Err() != nil {
			return err
		}
		lastErr = err
		c.demote(addr)
		if i+1 < len(nodes) {
			// (With none left, the error says it all: no line for it.)
			c.opts.Logger.Warn("node unreachable, trying another", "node", addr, "err", err)
		}
	}
	return fmt.Errorf("no node answered %s: %w", method, lastErr)
}

// unreachable tells a dead or unreachable node apart from an answer.
func unreachable(err error) bool {
	var re *transport.Error
	if errors.As(err, &re) {
		return errors.Is(err, transport.ErrUnavailable) || errors.Is(err, transport.ErrDeadline)
	}
	return true // a transport-level failure: dial, handshake, idle timeout
}

func (c *Client) demote(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.nodes) < 2 || c.nodes[0] != addr {
		return
	}
	c.nodes = append(c.nodes[1:], addr)
}

// Close releases the client's socket. Iterators must be closed first.
func (c *Client) Close() error {
	err := c.tr.Close()
	c.pc.Close()
	return err
}

// Distribute validates spec, creates the job (or joins it, if a job of that
// name exists with the same options) and returns an iterator over its
// batches. A spec that fails validation is an error and nothing is
// registered; so are options that do not normalize (NormalizeJobOptions:
// the error wraps ErrJobOptions).
func (c *Client) Distribute(ctx context.Context, spec *pipeline.Spec, o JobOptions) (*Iterator, error) {
	n, err := NormalizeJobOptions(o)
	if err != nil {
		return nil, fmt.Errorf("distribute %q: %w", o.Name, err)
	}
	return c.DistributeNormalized(ctx, spec, n)
}

// ErrJobOptions marks an error in the job options a caller gave
// (NormalizeJobOptions, Distribute): it names the option.
var ErrJobOptions = errors.New("JobOptions")

// NormalizeJobOptions normalizes o (jobspec.Options.Normalize: its
// defaults, and every rule of the job and of this consumer) and checks
// that this client can read such a job (its compression): the one place
// a client normalizes a job's options. Errors wrap ErrJobOptions and name
// the option. A caller that checks its options before doing anything else
// (the CLI, the Python package) normalizes here and distributes with
// DistributeNormalized.
func NormalizeJobOptions(o JobOptions) (jobspec.Normalized, error) {
	n, err := o.Normalize()
	if err != nil {
		return jobspec.Normalized{}, fmt.Errorf("%w: %w", ErrJobOptions, err)
	}
	if _, err := batch.ParseCompression(n.Job().Compression()); err != nil {
		return jobspec.Normalized{}, fmt.Errorf("%w: compression: %w", ErrJobOptions, err)
	}
	return n, nil
}

// DistributeNormalized is Distribute with options normalized already.
func (c *Client) DistributeNormalized(ctx context.Context, spec *pipeline.Spec, n jobspec.Normalized) (*Iterator, error) {
	name := n.Name()
	spec = withOrder(spec, n.Consumer())
	if _, err := spec.CanonicalEncoding(); err != nil {
		return nil, fmt.Errorf("distribute %q: invalid dataset spec: %w", name, err)
	}
	// Options that do not compose with the spec (a take the nodes cannot
	// apply under exactly-once) are refused here, before anything is
	// sent (jobspec.Conflicts).
	if err := n.CheckSpec(api.SpecFeatures(spec)); err != nil {
		return nil, fmt.Errorf("distribute %q: %w: %w", name, ErrJobOptions, err)
	}
	// A DYNAMIC job takes and skips over the epoch's order: the job's
	// spec is the one with its take and skip applied to the source
	// (CheckSpec refused what cannot be, where that matters).
	if n.Job().Sharding() == jobspec.Dynamic {
		var err error
		if spec, n, err = foldTakeSkip(spec, n); err != nil {
			return nil, fmt.Errorf("distribute %q: %w: %w", name, ErrJobOptions, err)
		}
	}
	canon, err := spec.CanonicalEncoding()
	if err != nil {
		return nil, fmt.Errorf("distribute %q: invalid dataset spec: %w", name, err)
	}
	off, fraction, err := offloadPlan(spec, n)
	if err == nil {
		err = c.checkLocalCensus(ctx, n)
	}
	if err != nil {
		return nil, fmt.Errorf("distribute %q: %w: %w", name, ErrOffloadOptions, err)
	}
	consumer, err := newConsumerID()
	if err != nil {
		return nil, err
	}
	// The options go normalized, so that a node that predates a field
	// (Workers) reads its older form (MaxWorkers, Autoscale) and creates
	// the same job. The checkpoint travels as Resume.
	req := api.DistributeRequest{Spec: canon, Options: n.Options(), Consumer: consumer}
	req.Options.Resume = nil
	var from *checkpoint
	if ck := n.Consumer().Resume(); ck != nil {
		if from, req.Resume, err = resumeFrom(ck, spec, n); err != nil {
			return nil, fmt.Errorf("distribute %q: resume: %w", name, err)
		}
	}
	ord, err := orderedFor(spec, n, from)
	if err != nil {
		return nil, fmt.Errorf("distribute %q: %w", name, err)
	}
	// What the job chose (its cut, its workers) is adopted, not asked
	// for again differently (adopt.go).
	if err := c.adopt(ctx, spec, n, &req, off, from); err != nil {
		return nil, fmt.Errorf("distribute %q: %w", name, err)
	}
	fraction = c.autoColocated(ctx, off, fraction)
	var info api.JobInfo
	if err := c.call(ctx, api.MethodDistribute, req, &info); err != nil {
		return nil, fmt.Errorf("distribute %q: %w", name, err)
	}
	if err := api.CheckJobInfo(info); err != nil {
		return nil, fmt.Errorf("distribute %q: %w", name, err)
	}
	if from == nil && info.State == api.JobFinished {
		c.leave(name, consumer)
		return nil, &JobFinishedError{Job: name, ID: info.ID, CreatedAt: info.CreatedAt, Consumers: len(info.Consumers) - 1, GCAfter: info.Options.GCAfter}
	}
	if err := c.startOffload(ctx, info, consumer, off, fraction); err != nil {
		return nil, fmt.Errorf("distribute %q: %w", name, err)
	}
	batched := spec.Batched()
	if off != nil && off.cut > 0 {
		batched = false // the nodes ship single elements
	}
	if ord != nil {
		ord.stall = c.opts.ReorderStall
	}
	return newIterator(c, info, consumer, batched, n.Consumer().Index(), from, off.withSpec(spec, fraction), ord), nil
}

// foldTakeSkip is spec with its take and skip applied to the source
// (pipeline.FoldTakeSkip), and n with its cut (offload_boundary, an op
// index of spec) moved back past the ops that removed; spec and n as
// they are if there is nothing to fold.
func foldTakeSkip(spec *pipeline.Spec, n jobspec.Normalized) (*pipeline.Spec, jobspec.Normalized, error) {
	folded, ok, _ := spec.FoldTakeSkip()
	if !ok {
		return spec, n, nil
	}
	if cut := n.Job().OffloadBoundary(); cut > 0 && spec.TakeSkipBefore(cut) > 0 {
		o := n.Options()
		o.OffloadBoundary = cut - spec.TakeSkipBefore(cut)
		m, err := o.Normalize()
		if err != nil {
			return nil, n, fmt.Errorf("offload_boundary %d without the take and skip before it: %w", cut, err)
		}
		n = m
	}
	return folded, n, nil
}

// ErrJobFinished is wrapped by the error of Distribute (without Resume)
// and Attach when the job of that name has already run to its end: a job
// is one run of its dataset, and its name stays taken until the job is
// garbage-collected (GCAfter after its last consumer left). Reading it
// again would deliver nothing; the error says so instead (the CLI exits
// non-zero with it, Python raises feedmesh.JobFinished). To read the
// dataset again, use another job name (a new epoch's, say); to go on from
// a checkpoint, resume (JobOptions.Resume), which a finished job allows.
// A consumer that joins a job that its fellow consumers have just read to
// its end gets it too: there was nothing left for it.
var ErrJobFinished = errors.New("job finished")

// JobFinishedError is ErrJobFinished with what the cluster said of the job.
type JobFinishedError struct {
	Job       string
	ID        uint64
	CreatedAt time.Time     // when the job was created (the cluster leader's clock)
	Consumers int           // other consumers still attached (reading what they hold)
	GCAfter   time.Duration // how long after its last consumer left the name stays taken
}

func (e *JobFinishedError) Error() string {
	others := ""
	if e.Consumers > 0 {
		others = fmt.Sprintf("; %d other consumer(s) still attached read what they hold", e.Consumers)
	}
	return fmt.Sprintf("job %q: %v: it was created %s and has delivered all its data%s; a job is one run of its dataset: read the dataset again under another job name (Python's FeedmeshDataset: set_epoch), or once the job is garbage-collected (gc_after %v after its last consumer left); a checkpoint resumes it (resume)",
		e.Job, ErrJobFinished, e.CreatedAt.UTC().Format(time.RFC3339), others, e.GCAfter)
}

// Is makes errors.Is(err, ErrJobFinished) hold.
func (e *JobFinishedError) Is(target error) bool { return target == ErrJobFinished }
