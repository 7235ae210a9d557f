package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/feedmesh/feedmesh/bench/transportbench"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/transport/batch"
)

func init() {
	registerBench(cli.Command{Name: "transport", Summary: "batch stream throughput and CPU/GB: feedmesh QUIC vs quic-go, gRPC+TLS, TCP+TLS, TCP (two processes)", Run: benchTransport})
}

// peerFlag, as the first argument of `feedmesh-bench transport`, makes this
// process one peer of a measurement (started by the harness; not listed in
// the help).
const peerFlag = "--peer"

// baselineHint says how to get the gRPC/TCP baselines.
const baselineHint = "grpc-tls, tcp-tls and tcp need the baseline binary: cd bench/baseline && go build -o /tmp/fm-baseline . ; then pass --baseline /tmp/fm-baseline"

func benchTransport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == peerFlag {
		return transportbench.RunPeer(ctx, args[1:], os.Stdin, stdout)
	}
	def := transportbench.DefaultConfig()
	fs := prog.NewFlagSet("transport", "[--path loopback|veth] [--rate 1gbit] [--sizes 65536,1048576,16777216] [--seconds N] [--runs N] [--baseline BIN] [--levers] [--compress lz4,zstd] [--workload raw|text] [--json]", stderr)
	path := fs.String("path", def.Path, "loopback, or veth (two network namespaces joined by a veth pair, MTU 1500; needs root and ip)")
	rate := fs.String("rate", "", "with --path veth: shape the sender's egress to this rate with tc tbf for the run (tc's syntax: 1gbit, 500mbit, 100mbit; needs tc), removed afterwards; scripts/veth.sh rate sets the same by hand")
	sizes := fs.String("sizes", joinInts(def.Sizes), "batch sizes in bytes, comma-separated")
	seconds := fs.Float64("seconds", def.Seconds, "seconds the sender sends per measurement")
	runs := fs.Int("runs", def.Runs, "measurements per transport and size (medians are reported)")
	baseline := fs.String("baseline", "", "binary built from bench/baseline (gRPC+TLS, TCP+TLS, TCP); without it those rows are left out")
	transports := fs.String("transports", "", "comma-separated subset of feedmesh,quic-raw,grpc-tls,tcp-tls,tcp (default all)")
	levers := fs.Bool("levers", false, "also measure feedmesh variants: GOMAXPROCS=1, 1 or 4 streams per worker, 4 client sockets, recycled buffers (Batch.Release), GRO off, fixed credit window, batch-by-batch sends, batches encoded anew per send (encode=fresh), and every compression (as --compress lz4,zstd)")
	compress := fs.String("compress", "none", "comma-separated batch compressions ("+strings.Join(compressionNames(), ", ")+"; none adds nothing): each adds a feedmesh variant compress=NAME, the receiver asking the worker to compress every batch's tail; the sender encodes and compresses each batch fresh, in its measured CPU, and the variant encode=fresh (added too) encodes fresh without compressing: compare SEND CPU with it")
	workload := fs.String("workload", transportbench.WorkloadRaw, "raw: one batch of random bytes per --sizes entry, repeated; text: real bucketed token batches (synthetic text → tokenize → bucket_by_sequence_length, --sizes ignored) cycled, shipped padded by the baselines and as the worker ships them by feedmesh: unpadded, token ids narrowed to 2 bytes (quic-raw left out)")
	textExamples := fs.Int64("text-examples", transportbench.DefaultTextExamples, "text workload: sentences the pipeline reads (all its batches are built once and cycled)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: path, rate (veth rate limit, empty when unshaped), workload, transport, variant, batch_bytes (text: mean padded batch), runs, mb_per_s, batches_per_s, recv_cpu_s_per_gb, send_cpu_s_per_gb, ratio_vs_grpc_tls (MB/s), recv_cpu_ratio_vs_grpc_tls, batches_ratio_vs_grpc_tls, wire_bytes_per_batch (bytes the sender wrote per batch: after unpadding and compression), samples_mb_per_s, errors")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: feedmesh-bench transport [flags]\n\nA sender process (the worker) streams batches of random bytes to a receiver process (the client)\nfor --seconds; MB/s and batches/s are the receiver's, CPU-s/GB each process's own (getrusage over the\nmeasured window). Ratios compare with grpc-tls measured in the same run. Progress goes to stderr.\n\n"+
			"--workload text sends real token batches instead: the baselines ship them padded (as tf.data service),\nfeedmesh unpadded with token ids in 2 bytes (the receiver re-pads and widens); compare batches/s (× GRPC-TLS) and wire bytes per batch.\n\n"+
			"--compress lz4,zstd adds feedmesh rows with compressed batch tails; --path veth --rate 1gbit measures a\nbandwidth-limited link, where fewer bytes on the wire can pay for the CPU they cost.\n\n"+baselineHint+"\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg := def
	cfg.Path, cfg.Seconds, cfg.Runs, cfg.Levers, cfg.Progress = *path, *seconds, *runs, *levers, stderr
	cfg.Workload, cfg.TextExamples = *workload, *textExamples
	cfg.Transports = cli.SplitList(*transports)
	cfg.Compress, cfg.Rate = cli.SplitList(*compress), strings.TrimSpace(*rate)
	// The flags' own errors first, in their names (Validate repeats them
	// for other callers, in Config's).
	for _, name := range cfg.Compress {
		if _, err := batch.ParseCompression(name); err != nil {
			return fmt.Errorf("--compress: %w", err)
		}
	}
	if cfg.Rate != "" {
		if cfg.Path != transportbench.Veth {
			return fmt.Errorf("--rate %s needs --path veth: only the veth pair can be shaped (loopback is not)", cfg.Rate)
		}
		if _, err := transportbench.ParseRate(cfg.Rate); err != nil {
			return fmt.Errorf("--rate: %w", err)
		}
	}
	var err error
	if cfg.Sizes, err = parseInts(*sizes); err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable to start peers: %w", err)
	}
	cfg.Self = []string{exe, "transport", peerFlag}
	if *baseline != "" {
		if fi, err := os.Stat(*baseline); err != nil || fi.IsDir() {
			fmt.Fprintf(stderr, "--baseline %s: not a file; reporting feedmesh and quic-raw only.\n%s\n", *baseline, baselineHint)
		} else {
			cfg.Baseline = *baseline
		}
	} else {
		fmt.Fprintln(stderr, "no --baseline: reporting feedmesh and quic-raw only.\n"+baselineHint)
	}
	rows, err := transportbench.Run(ctx, cfg)
	if errors.Is(err, transportbench.ErrSkipped) {
		fmt.Fprintf(stderr, "feedmesh-bench transport: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	if *jsonOut {
		return cli.WriteJSON(stdout, rows)
	}
	return transportbench.WriteTable(stdout, rows)
}

// compressionNames lists the compressions --compress takes (not none).
func compressionNames() []string {
	var out []string
	for _, n := range batch.Compressions {
		if c, err := batch.ParseCompression(n); err == nil && c != batch.CompressNone {
			out = append(out, n)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range cli.SplitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number of bytes", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no sizes given")
	}
	return out, nil
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
