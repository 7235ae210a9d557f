package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// dialOptions are fm_dial's options, a JSON object from the caller (the
// Python package's Client keywords): client.Options under snake_case
// names, durations in seconds. Absent fields keep client.Options'
// defaults.
type dialOptions struct {
	TLSCA   string `json:"tls_ca"`
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	// Token: client.Options.Token, an access token.
	Token string `json:"token"`

	Window           int     `json:"window"`
	WindowBytes      int64   `json:"window_bytes"`
	StreamsPerWorker int     `json:"streams_per_worker"`
	PrefetchBatches  int     `json:"prefetch_batches"`
	PrefetchBytes    int64   `json:"prefetch_bytes"`
	RecycleBytes     int64   `json:"recycle_bytes"`
	Heartbeat        float64 `json:"heartbeat_interval"`
	RequestTimeout   float64 `json:"request_timeout"`
	ReceiptInterval  float64 `json:"receipt_interval"`
	// ResumeWait: client.Options.ResumeWait (a resumed job that waits for
	// other consumers' checkpoints fails after it; negative: never).
	ResumeWait float64 `json:"resume_wait"`
	// UnavailableTimeout: client.Options.UnavailableTimeout (seconds;
	// negative: wait for ever). The Python package sends -1 for None or 0.
	UnavailableTimeout float64 `json:"unavailable_timeout"`
	// Transport is "default" (transport.DefaultConfig) or "fast"
	// (transport.FastConfig: a dead node noticed in ~1.5 s, for clusters
	// run with --preset fast, as the tests do).
	Transport string `json:"transport"`
	// DialTimeout bounds fm_dial (seconds; default 10).
	DialTimeout float64 `json:"dial_timeout"`
	// LogLevel: the least level of the client's records kept for the
	// caller (fm_logs; the Python package logs them to Python's logging,
	// logger "feedmesh"): "debug", "info", "warn" (default), "error" or
	// "off".
	LogLevel string `json:"log_level"`
	// OffloadProfiles: client.Options.OffloadProfiles (a file where
	// offload auto remembers its profiles; none kept by default).
	OffloadProfiles string `json:"offload_profiles"`
	// OffloadColocation: client.Options.OffloadColocation ("detect", the
	// default, or "ignore").
	OffloadColocation string `json:"offload_colocation"`
}

// decodeStrict decodes one JSON object into v; unknown fields are errors
// naming them, so a misspelt keyword does not pass unnoticed.
func decodeStrict(text string, v any) error {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// clientOptions turns fm_dial's JSON into the client's options and the
// dial's timeout. Errors wrap errArg.
func clientOptions(addr, text string) (client.Options, time.Duration, error) {
	var d dialOptions
	if err := decodeStrict(text, &d); err != nil {
		return client.Options{}, 0, fmt.Errorf("%w: client options: %v", errArg, err)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return client.Options{}, 0, fmt.Errorf("%w: node address %q: want host:port (the node's QUIC --port): %v", errArg, addr, err)
	}
	o := client.Options{
		Window: d.Window, WindowBytes: d.WindowBytes, StreamsPerWorker: d.StreamsPerWorker,
		PrefetchBatches: d.PrefetchBatches, PrefetchBytes: d.PrefetchBytes, RecycleBytes: d.RecycleBytes,
		HeartbeatInterval: seconds(d.Heartbeat), RequestTimeout: seconds(d.RequestTimeout),
		ReceiptInterval: seconds(d.ReceiptInterval), ResumeWait: seconds(d.ResumeWait),
		OffloadProfiles:    d.OffloadProfiles,
		OffloadColocation:  d.OffloadColocation,
		UnavailableTimeout: seconds(d.UnavailableTimeout), Token: d.Token,
	}
	switch d.Transport {
	case "", "default":
	case "fast":
		fast := transport.FastConfig()
		o.Transport = &fast
	default:
		return client.Options{}, 0, fmt.Errorf("%w: transport %q: want default or fast", errArg, d.Transport)
	}
	if d.TLSCA != "" || d.TLSCert != "" || d.TLSKey != "" {
		tlsConf, err := transport.ClientTLS(d.TLSCA, d.TLSCert, d.TLSKey)
		if err != nil {
			return client.Options{}, 0, fmt.Errorf("%w: %v", errArg, err)
		}
		o.TLS = tlsConf
	}
	var level slog.Level
	switch strings.ToLower(d.LogLevel) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "", "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	case "off", "none":
		level = slog.LevelError + 100
	default:
		return client.Options{}, 0, fmt.Errorf("%w: log_level %q: want debug, info, warn, error or off", errArg, d.LogLevel)
	}
	// To the caller (fm_logs): Python's logging, logger "feedmesh". At the
	// default level the one INFO line of each job's offload and workers
	// decision goes too (cli.WithDecisions), as an INFO record.
	o.Logger = slog.New(&callerHandler{level: level, decisions: level == slog.LevelWarn})
	timeout := seconds(d.DialTimeout)
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return o, timeout, nil
}

// jobOptions decodes fm_distribute's options: client.JobOptions
// (jobspec.Options) as JSON, under its own json names (the Python
// package's distribute keywords: name, sharding, epochs, num_consumers,
// consumer_index, share, coordinated, pad_final_round, compression,
// delivery, workers ("auto", "all" or a count, as a string or a number),
// max_workers, autoscale and its knobs, consumer_ttl and gc_after in
// nanoseconds, offload, local_cpus, offload_boundary), and normalizes
// them as the client does (client.NormalizeJobOptions: once; fm_distribute
// hands the result to DistributeNormalized). Errors wrap errArg.
func jobOptions(text string, resume []byte) (jobspec.Normalized, error) {
	var o client.JobOptions
	if err := decodeStrict(text, &o); err != nil {
		return jobspec.Normalized{}, fmt.Errorf("%w: job options: %v", errArg, err)
	}
	o.Resume = resume
	n, err := client.NormalizeJobOptions(o)
	if err != nil {
		return jobspec.Normalized{}, fmt.Errorf("%w: job %q: %v", errArg, o.Name, err)
	}
	return n, nil
}

// Where fm_distribute's spec argument comes from.
const (
	specText = 0 // YAML or JSON text (JSON when it starts with '{')
	specPath = 1 // a file, read as `feedmesh read --spec` reads it
)

// parseSpec parses and validates a dataset spec. Errors wrap errSpec.
func parseSpec(kind int, spec []byte) (*pipeline.Spec, error) {
	var (
		s   *pipeline.Spec
		err error
	)
	switch kind {
	case specPath:
		s, err = pipeline.LoadFile(string(spec))
	case specText:
		if bytes.HasPrefix(bytes.TrimSpace(spec), []byte("{")) {
			s, err = pipeline.ParseJSON(spec)
		} else {
			s, err = pipeline.ParseYAML(spec)
		}
	default:
		return nil, fmt.Errorf("%w: spec kind %d", errArg, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSpec, err)
	}
	return s, nil
}
