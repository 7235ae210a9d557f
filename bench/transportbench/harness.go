package transportbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/transport/batch"
)

// Paths a measurement can take.
const (
	Loopback = "loopback"
	Veth     = "veth"
)

// Config describes one benchmark invocation. Start from DefaultConfig.
type Config struct {
	// Path is Loopback or Veth (receiver and sender in two network namespaces
	// joined by a veth pair; needs root, see VethUp).
	Path string

	// Sizes are the batch sizes measured, in bytes, each in [1, MaxBatchBytes].
	Sizes []int

	// Seconds is how long the sender sends in one measurement. Short runs
	// weigh connection set-up and slow start more; the first batch received
	// is never counted.
	Seconds float64

	// Runs is how many times each (transport, size) is measured; rows report
	// medians. Transports take turns within a run (the starting one rotates),
	// so a drift of the shared machine hits all of them alike.
	Runs int

	// Self is the command line that starts a feedmesh peer; RunPeer's
	// arguments are appended (e.g. [/path/feedmesh-bench transport --peer]).
	// It must be an absolute path for the veth path.
	Self []string

	// Baseline is the path of the binary built from bench/baseline; empty
	// leaves out grpc-tls, tcp-tls and tcp (and the ratios).
	Baseline string

	// Transports, when not empty, restricts the transports measured (by name:
	// feedmesh, quic-raw, grpc-tls, tcp-tls, tcp). Lever variants count as
	// feedmesh.
	Transports []string

	// Levers adds the feedmesh variants, each the shipped path with one
	// change: GOMAXPROCS=1 in both peers; 1 or 4 streams per worker (over
	// as many QUIC connections of one client socket) instead of 2; 4 client
	// sockets with one stream each; buffers recycled (Batch.Release); GRO
	// off; the credit window fixed at 4 (no WindowBytes); the sender writing
	// batch by batch (no SendAll); every batch encoded anew before it is
	// sent (encode=fresh); and every compression (as Compress).
	Levers bool

	// Compress adds, for each batch compression named (batch.Compressions:
	// lz4, zstd; "none" adds nothing, repeats count once), the feedmesh
	// variant "compress=<name>": the receiver asks for it in its
	// OpenRequest, the worker's Sender compresses every batch's tail. The
	// sender then encodes every batch anew before sending it, so each is
	// compressed fresh, as a real worker's (Frame.Compressed caches its
	// result on a frame, and the sender otherwise reuses a few frames).
	// Compress also adds the variant encode=fresh, which encodes every
	// batch anew the same way but does not compress: the compressed
	// variants' sender CPU compares with it, not with the default's
	// (encoding a text batch costs about as much as a third of its lz4
	// compression; BenchmarkSenderFreshFrame).
	Compress []string

	// Rate, with Path Veth, shapes the sender's end of the veth pair
	// (egress, the direction of the batches) to this rate with a tc tbf
	// qdisc for the run, and removes it afterwards: tc's rate syntax, e.g.
	// 1gbit, 500mbit, 100mbit. Empty leaves the pair unshaped (unless
	// scripts/veth.sh rate shaped it: that is then reported). See veth.go.
	Rate string

	// PeerTimeout bounds each peer process beyond Seconds (start-up,
	// handshake, draining); a peer still running then is killed.
	PeerTimeout time.Duration

	// Workload is WorkloadRaw (one batch of random bytes per size, repeated)
	// or WorkloadText (real bucketed token batches, cycled; Sizes is then
	// ignored). Empty means WorkloadRaw.
	Workload string

	// TextExamples is the number of sentences the text workload's pipeline
	// reads (DefaultTextExamples when 0); all its batches are built once,
	// written to a payload file for the peers, and cycled through.
	TextExamples int64

	// Progress receives one line per measurement; nil discards them.
	Progress io.Writer

	// textFile is the payload file of a text run (set by Run).
	textFile string
}

// compressions returns the compressions of the compress=<name> variants, in
// batch.Compressions order, without none and repeats (the names are
// checked by Validate).
func (c Config) compressions() []batch.Compression {
	want := make(map[batch.Compression]bool)
	for _, name := range c.Compress {
		if z, err := batch.ParseCompression(name); err == nil && z != batch.CompressNone {
			want[z] = true
		}
	}
	var out []batch.Compression
	for _, name := range batch.Compressions {
		z, _ := batch.ParseCompression(name)
		if z != batch.CompressNone && (want[z] || c.Levers) {
			out = append(out, z)
		}
	}
	return out
}

// DefaultConfig measures the three issue sizes on loopback, 3 runs of 2 s
// each: about 40 s per size with the baseline.
func DefaultConfig() Config {
	return Config{
		Path:        Loopback,
		Sizes:       []int{64 << 10, 1 << 20, 16 << 20},
		Seconds:     2,
		Runs:        3,
		PeerTimeout: 30 * time.Second,
	}
}

// maxRuns and maxSeconds keep an invocation bounded.
const (
	maxRuns    = 100
	maxSeconds = 600
)

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	text := c.Workload == WorkloadText
	switch {
	case c.Workload != "" && c.Workload != WorkloadRaw && !text:
		return fmt.Errorf("transportbench: Workload %q, want %s or %s", c.Workload, WorkloadRaw, WorkloadText)
	case c.TextExamples < 0 || c.TextExamples > maxTextExamples:
		return fmt.Errorf("transportbench: TextExamples %d out of range [0, %d]", c.TextExamples, maxTextExamples)
	case c.Path != Loopback && c.Path != Veth:
		return fmt.Errorf("transportbench: Path %q, want %s or %s", c.Path, Loopback, Veth)
	case len(c.Sizes) == 0 && !text:
		return errors.New("transportbench: Sizes is empty")
	case c.Seconds <= 0 || c.Seconds > maxSeconds:
		return fmt.Errorf("transportbench: Seconds %g out of range (0, %d]", c.Seconds, maxSeconds)
	case c.Runs < 1 || c.Runs > maxRuns:
		return fmt.Errorf("transportbench: Runs %d out of range [1, %d]", c.Runs, maxRuns)
	case len(c.Self) == 0:
		return errors.New("transportbench: Self is empty")
	case c.PeerTimeout <= 0:
		return errors.New("transportbench: PeerTimeout must be positive")
	}
	for _, s := range c.Sizes {
		if text {
			break
		}
		if s < 1 || s > MaxBatchBytes {
			return fmt.Errorf("transportbench: size %d out of range [1, %d]", s, MaxBatchBytes)
		}
	}
	for _, name := range c.Compress {
		if _, err := batch.ParseCompression(name); err != nil {
			return fmt.Errorf("transportbench: Compress: %w", err)
		}
	}
	if c.Rate != "" {
		if c.Path != Veth {
			return fmt.Errorf("transportbench: Rate %q needs Path %s (it shapes the veth pair; loopback cannot be shaped)", c.Rate, Veth)
		}
		if _, err := ParseRate(c.Rate); err != nil {
			return fmt.Errorf("transportbench: Rate: %w", err)
		}
	}
	known := map[string]bool{Feedmesh: true, QuicRaw: true, GRPCTLS: true, TCPTLS: true, TCP: true}
	for _, t := range c.Transports {
		if !known[t] {
			return fmt.Errorf("transportbench: unknown transport %q (want feedmesh, quic-raw, grpc-tls, tcp-tls or tcp)", t)
		}
	}
	return nil
}

// benchCase is one transport (or lever variant) to measure.
type benchCase struct {
	transport string
	variant   string   // "default" or the lever
	env       []string // extra environment of both peers
	opts      peerOptions
}

func (c benchCase) name() string {
	if c.variant == "default" {
		return c.transport
	}
	return c.transport + "/" + c.variant
}

// cases lists what cfg measures, in table order.
func (cfg Config) cases() []benchCase {
	want := func(t string) bool {
		if len(cfg.Transports) == 0 {
			return true
		}
		for _, w := range cfg.Transports {
			if w == t {
				return true
			}
		}
		return false
	}
	// The shipped client: Window 4 (grown by WindowBytes for small
	// batches), StreamsPerWorker 2 over 2 QUIC connections of one socket.
	shipped := peerOptions{conns: 1, credit: 4, streams: 2}
	var cs []benchCase
	if want(Feedmesh) {
		cs = append(cs, benchCase{transport: Feedmesh, variant: "default", opts: shipped})
		lever := func(name string, env []string, change func(*peerOptions)) benchCase {
			o := shipped
			change(&o)
			return benchCase{transport: Feedmesh, variant: name, env: env, opts: o}
		}
		if cfg.Levers {
			cs = append(cs,
				lever("gomaxprocs=1", []string{"GOMAXPROCS=1"}, func(*peerOptions) {}),
				lever("streams=1", nil, func(o *peerOptions) { o.streams = 1 }),
				lever("streams=4", nil, func(o *peerOptions) { o.streams = 4 }),
				lever("sockets=2", nil, func(o *peerOptions) { o.conns, o.streams = 2, 1 }),
				lever("sockets=4", nil, func(o *peerOptions) { o.conns, o.streams = 4, 1 }),
				lever("release", nil, func(o *peerOptions) { o.release = true }),
				lever("gro=off", nil, func(o *peerOptions) { o.groOff = true }),
				lever("window=fixed", nil, func(o *peerOptions) { o.fixedWindow = true }),
				lever("send=one-by-one", nil, func(o *peerOptions) { o.sendOne = true }))
			if cfg.Workload == WorkloadText {
				cs = append(cs, lever("narrow=off", nil, func(o *peerOptions) { o.noNarrow = true }))
			}
		}
		zs := cfg.compressions()
		if cfg.Levers || len(zs) > 0 {
			// The compressed variants encode every batch anew; this one
			// too, without compressing: their CPU reference.
			cs = append(cs, lever("encode=fresh", nil, func(o *peerOptions) { o.fresh = true }))
		}
		for _, z := range zs {
			cs = append(cs, lever("compress="+z.String(), nil, func(o *peerOptions) { o.compress, o.fresh = z, true }))
		}
	}
	for _, t := range []string{QuicRaw, GRPCTLS, TCPTLS, TCP} {
		if !want(t) || (t != QuicRaw && cfg.Baseline == "") {
			continue
		}
		if t == QuicRaw && cfg.Workload == WorkloadText {
			continue // quic-raw does not run the text workload
		}
		cs = append(cs, benchCase{transport: t, variant: "default", opts: peerOptions{conns: 1, credit: 1}})
	}
	return cs
}

// Run measures every case at every size, Runs times, and returns one row per
// (transport/variant, size). A failed measurement is reported on Progress and
// in the row's Errors; Run fails only on a bad Config, a veth set-up failure
// or ctx ending.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	rate := "" // the veth pair's shaping in force, for the rows
	if cfg.Path == Veth {
		if cfg.Rate != "" {
			if err := needTC(); err != nil {
				return nil, err
			}
		}
		down, err := VethUp(ctx, progress)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := down(); err != nil {
				fmt.Fprintf(progress, "veth teardown: %v\n", err)
			}
		}()
		// Deferred after VethUp's teardown, so it runs before it: the
		// qdisc goes also from namespaces the run did not create.
		var unshape func() error
		if rate, unshape, err = ShapeVeth(ctx, cfg.Rate, progress); err != nil {
			return nil, err
		}
		defer func() {
			if err := unshape(); err != nil {
				fmt.Fprintf(progress, "veth: removing the rate limit: %v\n", err)
			}
		}()
	}
	cases := cfg.cases()
	workload, sizes := WorkloadRaw, cfg.Sizes
	var ts textSet
	if cfg.Workload == WorkloadText {
		dir, err := os.MkdirTemp("", "fm-bench-text-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		n := cfg.TextExamples
		if n == 0 {
			n = DefaultTextExamples
		}
		if ts, err = writeTextPayload(ctx, dir, n); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "text workload: %d sentences → %d batches, %.0f bytes per batch padded (grpc-tls, tcp-tls, tcp), %.0f unpadded (feedmesh): %.2f× fewer\n",
			n, ts.records, ts.meanPadded, ts.meanUnpad, ts.paddedRatio)
		cfg.textFile = ts.path
		workload, sizes = WorkloadText, []int{int(math.Round(ts.meanPadded))}
	}
	where := cfg.Path // in progress lines
	if rate != "" {
		where += "@" + rate
	}
	var rows []Row
	for _, size := range sizes {
		label := sizeName(size)
		if workload == WorkloadText {
			label = "text"
		}
		samples := make([][]*sample, len(cases)) // [case][run], nil when failed
		errs := make([][]string, len(cases))
		for run := 0; run < cfg.Runs; run++ {
			for k := range cases {
				i := (k + run) % len(cases)
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				s, err := cfg.measure(ctx, cases[i], size)
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					errs[i] = append(errs[i], err.Error())
					fmt.Fprintf(progress, "[%s %s run %d/%d] %-28s FAILED: %v\n", where, label, run+1, cfg.Runs, cases[i].name(), err)
				} else if workload == WorkloadText {
					fmt.Fprintf(progress, "[%s %s run %d/%d] %-28s %8.0f batches/s  %6.0f wire B/batch  recv %5.2f  send %5.2f CPU-s/GB\n",
						where, label, run+1, cfg.Runs, cases[i].name(), s.batchesPerS, s.wirePerBatch, s.recvCPUPerGB, s.sendCPUPerGB)
				} else {
					fmt.Fprintf(progress, "[%s %s run %d/%d] %-28s %8.1f MB/s  %9.0f wire B/batch  recv %5.2f  send %5.2f CPU-s/GB\n",
						where, label, run+1, cfg.Runs, cases[i].name(), s.mbps, s.wirePerBatch, s.recvCPUPerGB, s.sendCPUPerGB)
				}
				samples[i] = append(samples[i], s)
			}
		}
		for _, r := range summarize(cfg.Path, size, cases, samples, errs) {
			r.Workload, r.Rate = workload, rate
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// sample is one measurement.
type sample struct {
	mbps, batchesPerS, recvCPUPerGB, sendCPUPerGB float64
	wirePerBatch                                  float64 // sender's bytes written per batch (after compression)
}

// measure runs one sender/receiver pair.
func (cfg Config) measure(ctx context.Context, c benchCase, size int) (*sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // kills whatever is still running
	timeout := cfg.PeerTimeout + time.Duration(cfg.Seconds*float64(time.Second))
	listen := "127.0.0.1:0"
	nsSend, nsRecv := "", ""
	if cfg.Path == Veth {
		listen = AddrSend + ":0"
		nsSend, nsRecv = NSSend, NSRecv
	}
	o := c.opts
	o.transport, o.size, o.seconds, o.timeout, o.payloadFile = c.transport, size, cfg.Seconds, timeout, cfg.textFile
	argv := func(o peerOptions) []string {
		if c.transport == Feedmesh || c.transport == QuicRaw {
			return append(append([]string(nil), cfg.Self...), o.args()...)
		}
		a := []string{cfg.Baseline, o.role, "--transport", o.transport,
			"--seconds", fmt.Sprint(o.seconds), "--timeout", o.timeout.String(), "--listen", o.listen, "--addr", o.addr}
		if o.payloadFile != "" {
			return append(a, "--payload-file", o.payloadFile)
		}
		return append(a, "--size", fmt.Sprint(o.size))
	}

	so := o
	so.role, so.listen = "send", listen
	snd, err := startPeer(ctx, argv(so), c.env, nsSend)
	if err != nil {
		return nil, err
	}
	defer snd.stop()
	addrLine, err := snd.firstLine(ctx, timeout)
	if err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	var a struct{ Addr string }
	if err := json.Unmarshal(addrLine, &a); err != nil || a.Addr == "" {
		return nil, fmt.Errorf("sender printed %q, want {\"addr\":…}", addrLine)
	}

	ro := o
	ro.role, ro.addr = "recv", a.Addr
	rcv, err := startPeer(ctx, argv(ro), c.env, nsRecv)
	if err != nil {
		return nil, err
	}
	defer rcv.stop()
	rres, rerr := rcv.result(ctx, timeout)
	snd.release()
	sres, serr := snd.result(ctx, timeout)
	if rerr != nil || serr != nil {
		return nil, errors.Join(wrapErr("receiver", rerr), wrapErr("sender", serr))
	}
	if rres.Bytes == 0 || rres.Seconds <= 0 || sres.Bytes == 0 {
		return nil, fmt.Errorf("receiver counted %d bytes after the first batch: raise --seconds", rres.Bytes)
	}
	wire := sres.WireBytes
	if wire == 0 {
		wire = sres.Bytes // the baselines write what they count
	}
	return &sample{
		wirePerBatch: float64(wire) / float64(max(sres.Batches, 1)),
		mbps:         float64(rres.Bytes) / rres.Seconds / 1e6,
		batchesPerS:  float64(rres.Batches) / rres.Seconds,
		recvCPUPerGB: rres.CPUS / (float64(rres.Bytes) / 1e9),
		sendCPUPerGB: sres.CPUS / (float64(sres.Bytes) / 1e9),
	}, nil
}

func wrapErr(who string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", who, err)
}

// peerProc is one running peer process.
type peerProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	out     *lineBuffer
	errb    *tailBuffer
	done    chan struct{} // closed when Wait returned
	waitErr error
}

// startPeer starts argv (inside network namespace ns when not empty) with
// extra environment env.
func startPeer(ctx context.Context, argv, env []string, ns string) (*peerProc, error) {
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 2 * time.Second
	p := &peerProc{cmd: cmd, out: newLineBuffer(), errb: &tailBuffer{max: 4 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.errb
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// firstLine waits for the peer's first stdout line.
func (p *peerProc) firstLine(ctx context.Context, timeout time.Duration) ([]byte, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.out.first:
		return p.out.line(0), nil
	case <-p.done:
		select {
		case <-p.out.first:
			return p.out.line(0), nil
		default:
		}
		return nil, p.failure()
	case <-t.C:
		return nil, fmt.Errorf("no address after %s", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// result waits for the peer to exit and parses its last stdout line.
func (p *peerProc) result(ctx context.Context, timeout time.Duration) (result, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return result{}, fmt.Errorf("still running after %s", timeout)
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	if p.waitErr != nil {
		return result{}, p.failure()
	}
	var r result
	last := p.out.line(-1)
	if err := json.Unmarshal(last, &r); err != nil || r.Role == "" {
		return result{}, fmt.Errorf("last line %q is not a result", last)
	}
	return r, nil
}

// failure describes a peer that exited early or badly, with its stderr.
func (p *peerProc) failure() error {
	<-p.done
	msg := strings.TrimSpace(p.errb.String())
	if msg == "" {
		msg = "(no output)"
	}
	return fmt.Errorf("%v: %s", p.waitErr, msg)
}

// release closes the peer's stdin: a feedmesh sender then closes its endpoint.
func (p *peerProc) release() { p.stdin.Close() }

// stop kills the peer if it still runs and waits for it.
func (p *peerProc) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// lineBuffer keeps a peer's stdout (bounded) and signals its first line.
type lineBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan struct{}
	seen  bool
}

// maxStdout bounds what is kept of a peer's stdout: a few JSON lines.
const maxStdout = 64 << 10

func newLineBuffer() *lineBuffer { return &lineBuffer{first: make(chan struct{})} }

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len()+len(p) <= maxStdout {
		l.buf.Write(p)
	}
	if !l.seen && bytes.IndexByte(l.buf.Bytes(), '\n') >= 0 {
		l.seen = true
		close(l.first)
	}
	return len(p), nil
}

// line returns line i (negative: from the end) without its newline.
func (l *lineBuffer) line(i int) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := bytes.Split(bytes.TrimRight(l.buf.Bytes(), "\n"), []byte("\n"))
	if i < 0 {
		i += len(lines)
	}
	if i < 0 || i >= len(lines) {
		return nil
	}
	return append([]byte(nil), lines[i]...)
}

// tailBuffer keeps the last max bytes written (a peer's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
