package transportbench

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/transport/batch"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Self = []string{"/bin/true"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Path", func(c *Config) { c.Path = "wifi" }},
		{"Sizes", func(c *Config) { c.Sizes = nil }},
		{"size", func(c *Config) { c.Sizes = []int{0} }},
		{"size", func(c *Config) { c.Sizes = []int{MaxBatchBytes + 1} }},
		{"Seconds", func(c *Config) { c.Seconds = 0 }},
		{"Seconds", func(c *Config) { c.Seconds = 1e6 }},
		{"Runs", func(c *Config) { c.Runs = 0 }},
		{"Self", func(c *Config) { c.Self = nil }},
		{"PeerTimeout", func(c *Config) { c.PeerTimeout = 0 }},
		{"unknown transport", func(c *Config) { c.Transports = []string{"carrier-pigeon"} }},
		{"Workload", func(c *Config) { c.Workload = "images" }},
		{"TextExamples", func(c *Config) { c.Workload, c.TextExamples = WorkloadText, -1 }},
		{"TextExamples", func(c *Config) { c.Workload, c.TextExamples = WorkloadText, maxTextExamples+1 }},
		{`Compress: compression "lz5"`, func(c *Config) { c.Compress = []string{"lz4", "lz5"} }},
		{"Rate \"1gbit\" needs Path veth", func(c *Config) { c.Rate = "1gbit" }},
		{`Rate: rate "fast"`, func(c *Config) { c.Path, c.Rate = Veth, "fast" }},
		{`Rate: rate "100"`, func(c *Config) { c.Path, c.Rate = Veth, "100" }},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %q", tc.field, err, tc.field)
		}
	}
}

func TestTextConfig(t *testing.T) {
	c := DefaultConfig()
	c.Self, c.Workload, c.Sizes = []string{"/bin/true"}, WorkloadText, nil
	if err := c.Validate(); err != nil {
		t.Errorf("text without sizes: %v", err)
	}
	c.Baseline = "/x/baseline"
	var names []string
	for _, bc := range c.cases() {
		names = append(names, bc.name())
	}
	if want := []string{"feedmesh", "grpc-tls", "tcp-tls", "tcp"}; !reflect.DeepEqual(names, want) {
		t.Errorf("text cases %v, want %v (no quic-raw)", names, want)
	}
	if err := RunPeer(context.Background(), []string{"send", "--transport", QuicRaw, "--payload-file", "/x"}, strings.NewReader(""), new(strings.Builder)); err == nil || !strings.Contains(err.Error(), "text workload") {
		t.Errorf("quic-raw with a payload file: %v", err)
	}
}

func TestCases(t *testing.T) {
	names := func(c Config) []string {
		var n []string
		for _, bc := range c.cases() {
			n = append(n, bc.name())
		}
		return n
	}
	c := DefaultConfig()
	if got, want := names(c), []string{"feedmesh", "quic-raw"}; !reflect.DeepEqual(got, want) {
		t.Errorf("without baseline: %v, want %v", got, want)
	}
	c.Baseline = "/x/baseline"
	c.Levers = true
	want := []string{"feedmesh", "feedmesh/gomaxprocs=1", "feedmesh/streams=1", "feedmesh/streams=4", "feedmesh/sockets=2", "feedmesh/sockets=4", "feedmesh/release", "feedmesh/gro=off", "feedmesh/window=fixed", "feedmesh/send=one-by-one",
		"feedmesh/encode=fresh", "feedmesh/compress=lz4", "feedmesh/compress=zstd",
		"quic-raw", "grpc-tls", "tcp-tls", "tcp"}
	if got := names(c); !reflect.DeepEqual(got, want) {
		t.Errorf("with baseline and levers: %v, want %v", got, want)
	}
	c.Transports = []string{"grpc-tls", "feedmesh"}
	c.Levers = false
	if got, want := names(c), []string{"feedmesh", "grpc-tls"}; !reflect.DeepEqual(got, want) {
		t.Errorf("subset: %v, want %v", got, want)
	}
	// Compress: one row per compression (none adds nothing, repeats count
	// once), in batch.Compressions order, after their reference
	// encode=fresh; the receiver asks for it and the sender encodes fresh.
	c.Compress = []string{"ZSTD", "none", "lz4", "zstd"}
	if got, want := names(c), []string{"feedmesh", "feedmesh/encode=fresh", "feedmesh/compress=lz4", "feedmesh/compress=zstd", "grpc-tls"}; !reflect.DeepEqual(got, want) {
		t.Errorf("compress: %v, want %v", got, want)
	}
	cs := c.cases()
	if o := cs[0].opts; o.compress != batch.CompressNone || o.fresh {
		t.Errorf("default case compresses or encodes fresh: %+v", o)
	}
	if o := cs[1].opts; o.compress != batch.CompressNone || !o.fresh {
		t.Errorf("encode=fresh case: %+v", o)
	}
	if o := cs[3].opts; o.compress != batch.CompressZstd || !o.fresh || o.conns != 1 || o.streams != 2 || o.credit != 4 {
		t.Errorf("compress=zstd case: %+v, want the shipped options with zstd, fresh", o)
	}
	c.Compress = []string{"none"}
	if got, want := names(c), []string{"feedmesh", "grpc-tls"}; !reflect.DeepEqual(got, want) {
		t.Errorf("compress none: %v, want %v", got, want)
	}
}

func TestPeerArgsRoundTrip(t *testing.T) {
	for _, o := range []peerOptions{
		{role: "send", transport: Feedmesh, listen: "10.123.0.1:0", size: 65536, seconds: 0.5, timeout: 3 * time.Second, conns: 4, credit: 4, streamWindow: 64 << 20, connWindow: 256 << 20},
		{role: "recv", transport: QuicRaw, addr: "127.0.0.1:9", size: 1 << 20, seconds: 2, timeout: time.Minute, conns: 1, credit: 1},
		{role: "recv", transport: Feedmesh, addr: "127.0.0.1:9", size: 1 << 20, seconds: 2, timeout: time.Minute, conns: 2, credit: 4, payloadFile: "/tmp/x y.bin"},
		{role: "send", transport: Feedmesh, listen: "127.0.0.1:0", size: 1 << 20, seconds: 2, timeout: time.Minute, conns: 1, credit: 4, streams: 2, compress: batch.CompressZstd, fresh: true},
		{role: "recv", transport: Feedmesh, addr: "127.0.0.1:9", size: 1 << 20, seconds: 2, timeout: time.Minute, conns: 1, credit: 4, compress: batch.CompressLZ4},
		{role: "send", transport: Feedmesh, listen: "127.0.0.1:0", size: 1 << 20, seconds: 2, timeout: time.Minute, conns: 1, credit: 4, fresh: true},
	} {
		got, err := parsePeer(o.args())
		if err != nil {
			t.Fatalf("parse %v: %v", o.args(), err)
		}
		if o.role == "send" {
			got.addr = ""
		} else {
			got.listen = ""
		}
		if got != o {
			t.Errorf("round trip: got %+v, want %+v", got, o)
		}
	}
}

func TestParsePeerRejects(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"serve"},
		{"send", "--size", "0"},
		{"send", "--size", "999999999999"},
		{"send", "--conns", "0"},
		{"send", "--conns", "17"},
		{"send", "--credit", "0"},
		{"send", "--seconds", "-1"},
		{"recv"}, // no --addr
		{"send", "extra"},
		{"send", "--bogus"},
		{"send", "--compress", "lz5"},
	} {
		if _, err := parsePeer(args); err == nil {
			t.Errorf("parsePeer(%q) accepted", args)
		}
	}
	if err := RunPeer(context.Background(), []string{"send", "--transport", GRPCTLS}, strings.NewReader(""), new(strings.Builder)); err == nil {
		t.Error("RunPeer ran a baseline transport")
	}
}

func TestSummarizePairsRunsWithGRPC(t *testing.T) {
	cases := []benchCase{{transport: Feedmesh, variant: "default"}, {transport: GRPCTLS, variant: "default"}, {transport: TCP, variant: "default"}}
	s := func(mbps, rcpu float64) *sample {
		return &sample{mbps: mbps, batchesPerS: mbps, recvCPUPerGB: rcpu, sendCPUPerGB: 1}
	}
	samples := [][]*sample{
		{s(100, 4), s(300, 4), s(200, 4)}, // ratios 0.2, 1.0, 0.5 → median 0.5
		{s(500, 1), s(300, 2), s(400, 1)},
		{nil, s(900, 0.5), nil}, // only run 2 succeeded
	}
	errs := [][]string{nil, nil, {"boom", "boom"}}
	rows := summarize(Loopback, 1<<20, cases, samples, errs)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	fm, g, tcp := rows[0], rows[1], rows[2]
	if fm.MBPerS != 200 || fm.Runs != 3 || *fm.RatioVsGRPCTLS != 0.5 || *fm.RecvCPURatioVsGRPCTLS != 4 {
		t.Errorf("feedmesh row %+v (ratio %v)", fm, *fm.RatioVsGRPCTLS)
	}
	if *fm.BatchesRatioVsGRPCTLS != 0.5 || *tcp.BatchesRatioVsGRPCTLS != 3 {
		t.Errorf("batches ratios %v, %v", *fm.BatchesRatioVsGRPCTLS, *tcp.BatchesRatioVsGRPCTLS)
	}
	if *g.RatioVsGRPCTLS != 1 || g.MBPerS != 400 {
		t.Errorf("grpc row %+v", g)
	}
	if tcp.Runs != 1 || *tcp.RatioVsGRPCTLS != 3 || len(tcp.Errors) != 2 {
		t.Errorf("tcp row %+v", tcp)
	}
	// Without grpc-tls the ratios are null.
	rows = summarize(Loopback, 1<<20, cases[:1], samples[:1], errs[:1])
	if rows[0].RatioVsGRPCTLS != nil {
		t.Errorf("ratio without grpc-tls: %v", *rows[0].RatioVsGRPCTLS)
	}
	var b strings.Builder
	if err := WriteTable(&b, rows); err != nil || !strings.Contains(b.String(), "—") {
		t.Errorf("table %q: %v", b.String(), err)
	}
}

func TestBuffersAreBounded(t *testing.T) {
	l := newLineBuffer()
	l.Write([]byte(`{"addr":"x"}` + "\n" + `{"role":`))
	select {
	case <-l.first:
	default:
		t.Fatal("first line not signalled")
	}
	l.Write([]byte(`"recv"}` + "\n"))
	if got := string(l.line(-1)); got != `{"role":"recv"}` {
		t.Errorf("last line %q", got)
	}
	l.Write(make([]byte, 2*maxStdout))
	if l.buf.Len() > maxStdout {
		t.Errorf("stdout buffer grew to %d", l.buf.Len())
	}
	tb := &tailBuffer{max: 8}
	tb.Write([]byte("0123456789abc"))
	if tb.String() != "56789abc" {
		t.Errorf("tail %q", tb.String())
	}
}

func TestHasNS(t *testing.T) {
	list := "fmbench-rx (id: 1)\nfmbench-tx-old\nother\n"
	if !hasNS(list, NSRecv) || hasNS(list, NSSend) {
		t.Error("hasNS matched wrongly")
	}
}

// TestFailedPeerIsReported: a peer that dies is a failed run in the row,
// not a hang or a harness failure.
func TestFailedPeerIsReported(t *testing.T) {
	c := DefaultConfig()
	c.Self = []string{"/bin/sh", "-c", "echo no such luck >&2; exit 3", "peer"}
	c.Sizes, c.Seconds, c.Runs, c.Transports = []int{64 << 10}, 0.5, 1, []string{Feedmesh}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Runs != 0 || len(rows[0].Errors) != 1 || !strings.Contains(rows[0].Errors[0], "no such luck") {
		t.Fatalf("rows %+v", rows)
	}
}

// TestRunLoopbackTiny runs every feedmesh-side transport and lever once, for
// half a second, with 64 KiB batches between two processes.
func TestRunLoopbackTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts peer processes")
	}
	c := peerConfig(t)
	c.Sizes, c.Seconds, c.Runs, c.Levers = []int{64 << 10}, 0.5, 1, true
	var progress strings.Builder
	c.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rows, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 14 {
		t.Fatalf("%d rows, want 14 (feedmesh, 12 levers, quic-raw)", len(rows))
	}
	for _, r := range rows {
		if r.Runs != 1 || len(r.Errors) > 0 || r.MBPerS <= 0 || r.RecvCPUSPerGB <= 0 || r.SendCPUSPerGB <= 0 || r.BatchBytes != 64<<10 || r.Rate != "" {
			t.Errorf("row %+v", r)
		}
		// Random bytes do not compress: every row puts the batch (feedmesh:
		// plus its frame's prefix and header) on the wire.
		if r.WireBytesPerBatch < 64<<10 || r.WireBytesPerBatch > 64<<10+256 {
			t.Errorf("%s/%s: %.0f wire bytes per 64 KiB batch", r.Transport, r.Variant, r.WireBytesPerBatch)
		}
		if r.RatioVsGRPCTLS != nil {
			t.Errorf("%s: ratio without grpc-tls", r.Transport)
		}
		// batches/s and MB/s describe the same batches.
		if got := r.BatchesPerS * 65536 / 1e6; got < r.MBPerS*0.99 || got > r.MBPerS*1.01 {
			t.Errorf("%s/%s: %.1f batches/s does not match %.1f MB/s", r.Transport, r.Variant, r.BatchesPerS, r.MBPerS)
		}
	}
	if !strings.Contains(progress.String(), "feedmesh/sockets=4") || !strings.Contains(progress.String(), "feedmesh/compress=zstd") {
		t.Errorf("progress lacks the lever runs:\n%s", progress.String())
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	started := t.TempDir() + "/started"
	c := DefaultConfig()
	c.Self = []string{"/bin/sh", "-c", "touch " + started + "; exec sleep 30", "peer"}
	c.Sizes, c.Runs, c.Transports = []int{64 << 10}, 1, []string{Feedmesh}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, c)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("peer never started")
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before cancel: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t0 := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after cancel: %v", err)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("Run took %s to stop", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after cancel (a peer was not killed)")
	}
}

// peerConfig is DefaultConfig with this test binary as the peer
// executable (its TestMain plays a peer when peerEnv is set, which the
// peers inherit).
func peerConfig(t *testing.T) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(peerEnv, "1") // inherited by the peers only: TestMain has run
	c := DefaultConfig()
	c.Self = []string{exe}
	return c
}
