package transportbench

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/feedmesh/feedmesh/transport/batch"
)

// Transport names, as they appear in rows and on the command line.
const (
	Feedmesh = "feedmesh"
	QuicRaw  = "quic-raw"
	GRPCTLS  = "grpc-tls"
	TCPTLS   = "tcp-tls"
	TCP      = "tcp"
)

// MaxBatchBytes bounds a batch size: each receiver holds a few batches.
const MaxBatchBytes = 128 << 20

// maxConns bounds the QUIC connections of one feedmesh pair.
const maxConns = 16

// peerOptions are the flags of one peer process.
type peerOptions struct {
	role         string // "send" or "recv"
	transport    string
	listen       string // sender: UDP address to listen on
	addr         string // receiver: the sender's address
	size         int
	seconds      float64
	timeout      time.Duration
	conns        int               // feedmesh: connections (one batch stream each)
	credit       int               // feedmesh: the client's credit window in batches
	streamWindow uint64            // feedmesh: transport.Config.StreamReceiveWindow, 0 = default
	connWindow   uint64            // feedmesh: transport.Config.ConnectionReceiveWindow, 0 = default
	payloadFile  string            // text workload: the payload file (replaces size)
	streams      int               // feedmesh: batch streams per client transport (0 = 1), spread over as many QUIC connections (DataConns), as client.Options.StreamsPerWorker
	groOff       bool              // feedmesh: transport.Config.GROBuffers = 0
	release      bool              // feedmesh: the receiver recycles batch buffers (as Batch.Release)
	fixedWindow  bool              // feedmesh: no ReceiverConfig.WindowBytes (the window stays at credit)
	sendOne      bool              // feedmesh: the sender writes batch by batch (Send), not SendAll
	noNarrow     bool              // feedmesh text: token ids at full width (EncodeOptions.Narrow off)
	compress     batch.Compression // feedmesh: what the receiver asks for in its OpenRequest (the sender checks it got that)
	fresh        bool              // feedmesh: the sender encodes every batch anew before sending it (always with compress)
}

// peerArgs renders o as the flags RunPeer parses (role first).
func (o peerOptions) args() []string {
	a := []string{o.role,
		"--transport", o.transport,
		"--seconds", fmt.Sprint(o.seconds),
		"--timeout", o.timeout.String(),
		"--conns", fmt.Sprint(o.conns),
		"--credit", fmt.Sprint(o.credit),
		"--stream-window", fmt.Sprint(o.streamWindow),
		"--conn-window", fmt.Sprint(o.connWindow),
		"--streams", fmt.Sprint(o.streams),
		fmt.Sprintf("--gro-off=%t", o.groOff),
		fmt.Sprintf("--release=%t", o.release),
		fmt.Sprintf("--fixed-window=%t", o.fixedWindow),
		fmt.Sprintf("--send-one=%t", o.sendOne),
		fmt.Sprintf("--no-narrow=%t", o.noNarrow),
		"--compress", o.compress.String(),
		fmt.Sprintf("--fresh=%t", o.fresh),
	}
	if o.payloadFile != "" {
		a = append(a, "--payload-file", o.payloadFile) // replaces --size
	} else {
		a = append(a, "--size", fmt.Sprint(o.size))
	}
	if o.role == "send" {
		return append(a, "--listen", o.listen)
	}
	return append(a, "--addr", o.addr)
}

// RunPeer runs one peer of a feedmesh or quic-raw measurement: args are
// "send" or "recv" followed by flags (the harness builds them). It speaks the
// protocol of bench/baseline: the sender prints {"addr":…} then, after
// sending, its result line; the receiver prints its result line. The sender
// keeps its endpoint open until stdin reaches EOF (the harness closes it once
// the receiver is done), so no batch in flight is cut off. With
// --payload-file (feedmesh only) the peers run the text workload: the sender
// cycles through the file's batches encoded unpadded, the receiver checks
// each re-padded batch against the file.
func RunPeer(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	o, err := parsePeer(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if dir := os.Getenv("FEEDMESH_BENCH_CPUPROFILE"); dir != "" {
		// For engineers: each peer writes DIR/<transport>-<role>-<pid>.prof.
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-%d.prof", o.transport, o.role, os.Getpid())))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var res result
	switch {
	case o.transport == QuicRaw && o.payloadFile != "":
		return fmt.Errorf("peer: %s does not run the text workload (--payload-file)", QuicRaw)
	case o.transport == Feedmesh && o.role == "send":
		res, err = feedmeshSend(ctx, o, stdin, stdout)
	case o.transport == Feedmesh:
		res, err = feedmeshRecv(ctx, o)
	case o.transport == QuicRaw && o.role == "send":
		res, err = quicRawSend(ctx, o, stdin, stdout)
	case o.transport == QuicRaw:
		res, err = quicRawRecv(ctx, o)
	default:
		return fmt.Errorf("peer: transport %q is not run by feedmesh (want %s or %s)", o.transport, Feedmesh, QuicRaw)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.transport, o.role, err)
	}
	return json.NewEncoder(stdout).Encode(res)
}

func parsePeer(args []string) (peerOptions, error) {
	if len(args) == 0 || (args[0] != "send" && args[0] != "recv") {
		return peerOptions{}, errors.New("peer: first argument must be send or recv")
	}
	o := peerOptions{role: args[0]}
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.transport, "transport", Feedmesh, "")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "")
	fs.StringVar(&o.addr, "addr", "", "")
	fs.IntVar(&o.size, "size", 1<<20, "")
	fs.Float64Var(&o.seconds, "seconds", 2, "")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "")
	fs.IntVar(&o.conns, "conns", 1, "")
	fs.IntVar(&o.credit, "credit", 4, "")
	fs.Uint64Var(&o.streamWindow, "stream-window", 0, "")
	fs.Uint64Var(&o.connWindow, "conn-window", 0, "")
	fs.StringVar(&o.payloadFile, "payload-file", "", "")
	fs.IntVar(&o.streams, "streams", 0, "")
	fs.BoolVar(&o.groOff, "gro-off", false, "")
	fs.BoolVar(&o.release, "release", false, "")
	fs.BoolVar(&o.fixedWindow, "fixed-window", false, "")
	fs.BoolVar(&o.sendOne, "send-one", false, "")
	fs.BoolVar(&o.noNarrow, "no-narrow", false, "")
	compress := fs.String("compress", "none", "")
	fs.BoolVar(&o.fresh, "fresh", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		return o, fmt.Errorf("peer: %w", err)
	}
	var err error
	if o.compress, err = batch.ParseCompression(*compress); err != nil {
		return o, fmt.Errorf("peer: --compress: %w", err)
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("peer: unexpected arguments %v", fs.Args())
	case o.size < 1 || o.size > MaxBatchBytes:
		return o, fmt.Errorf("peer: --size %d out of range [1, %d]", o.size, MaxBatchBytes)
	case o.seconds <= 0 || o.timeout <= 0:
		return o, errors.New("peer: --seconds and --timeout must be positive")
	case o.conns < 1 || o.conns > maxConns:
		return o, fmt.Errorf("peer: --conns %d out of range [1, %d]", o.conns, maxConns)
	case o.streams < 0 || o.streams > 16:
		return o, fmt.Errorf("peer: --streams %d out of range [0 (= 1), 16]", o.streams)
	case o.credit < 1:
		return o, fmt.Errorf("peer: --credit %d must be at least 1", o.credit)
	case o.role == "recv" && o.addr == "":
		return o, errors.New("peer: recv needs --addr")
	}
	return o, nil
}

// result is the last line a peer prints (the baseline prints the same).
// With a payload file, Bytes counts the records' (padded) bytes of the
// batches. A feedmesh sender adds WireBytes, the frame bytes it actually
// wrote (length prefix, header and tail: unpadded, compressed); absent
// elsewhere, it is the same as Bytes.
type result struct {
	Role      string  `json:"role"`
	Bytes     int64   `json:"bytes"`
	Batches   int64   `json:"batches"`
	Seconds   float64 `json:"seconds"`
	CPUS      float64 `json:"cpu_s"`
	WireBytes int64   `json:"wire_bytes,omitempty"`
}

// meter measures wall and process CPU time over a window.
type meter struct {
	t0   time.Time
	cpu0 float64
}

func startMeter() meter { return meter{t0: time.Now(), cpu0: CPUSeconds()} }

func (m meter) result(role string, bytes, batches int64) result {
	return result{Role: role, Bytes: bytes, Batches: batches, Seconds: time.Since(m.t0).Seconds(), CPUS: CPUSeconds() - m.cpu0}
}

// CPUSeconds is the user+system time of the whole process so far (the
// CPU meter of the feedmesh-bench benchmarks).
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func printAddr(w io.Writer, addr string) error {
	return json.NewEncoder(w).Encode(map[string]string{"addr": addr})
}

// waitRelease blocks until stdin reaches EOF or ctx ends.
func waitRelease(ctx context.Context, stdin io.Reader) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(stdin))
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// randomBytes returns n incompressible bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// selfSigned returns TLS 1.3 configs around a fresh self-signed certificate;
// the client does not verify it (the benchmark measures encryption, not
// authentication).
func selfSigned(alpn string) (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "feedmesh-bench"},
		DNSNames:     []string{"feedmesh-bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}}
	client = &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, NextProtos: []string{alpn}} // benchmark only
	return server, client, nil
}
