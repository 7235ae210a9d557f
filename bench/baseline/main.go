package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// maxSize bounds --size and each record of --payload-file: the receiver
// allocates one buffer of the largest size, and a frame announcing another
// size than the batch expected is rejected, so a peer cannot make it
// allocate more.
const maxSize = 256 << 20

// options are the flags shared by both roles.
type options struct {
	role      string
	transport string
	listen    string // sender: where to listen
	addr      string // receiver: where to dial
	size      int
	seconds   float64
	timeout   time.Duration
	payload   string  // --payload-file, replacing --size
	batches   batches // what is sent / expected, batch i being batches.at(i)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "send" && args[0] != "recv") {
		fmt.Fprintln(os.Stderr, "Usage: baseline send|recv --transport grpc-tls|tcp-tls|tcp [flags]  (see doc.go for the protocol)")
		return flag.ErrHelp
	}
	o := options{role: args[0]}
	fs := flag.NewFlagSet("baseline "+o.role, flag.ContinueOnError)
	fs.StringVar(&o.transport, "transport", "grpc-tls", "grpc-tls, tcp-tls or tcp")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "sender: address to listen on")
	fs.StringVar(&o.addr, "addr", "", "receiver: sender's address to dial")
	fs.IntVar(&o.size, "size", 1<<20, "batch size in bytes")
	fs.Float64Var(&o.seconds, "seconds", 2, "sender: how long to send")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "give up after this long")
	fs.StringVar(&o.payload, "payload-file", "", "send (and, receiving, expect) these batches in order, cycling, instead of --size random bytes: 8-byte big-endian length + bytes per record (both peers need the file)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := o.check(fs); err != nil {
		return err
	}
	if o.payload != "" {
		b, err := readPayloadFile(o.payload)
		if err != nil {
			return err
		}
		o.batches, o.size = b, b.max
	} else {
		o.batches = fixedBatches(o.size, o.role == "send")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	var res result
	var err error
	switch o.transport {
	case "grpc-tls":
		if o.role == "send" {
			res, err = grpcSend(ctx, o, stdout)
		} else {
			res, err = grpcRecv(ctx, o)
		}
	case "tcp", "tcp-tls":
		if o.role == "send" {
			res, err = streamSend(ctx, o, stdout)
		} else {
			res, err = streamRecv(ctx, o)
		}
	default:
		return fmt.Errorf("--transport %q: want grpc-tls, tcp-tls or tcp", o.transport)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.transport, o.role, err)
	}
	return json.NewEncoder(stdout).Encode(res)
}

// check validates the parsed flags.
func (o options) check(fs *flag.FlagSet) error {
	sizeSet := false
	fs.Visit(func(f *flag.Flag) { sizeSet = sizeSet || f.Name == "size" })
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	case o.payload != "" && sizeSet:
		return errors.New("--size and --payload-file exclude each other")
	case o.size < 1 || o.size > maxSize:
		return fmt.Errorf("--size %d out of range [1, %d]", o.size, maxSize)
	case o.seconds <= 0 || o.timeout <= 0:
		return errors.New("--seconds and --timeout must be positive")
	case o.role == "recv" && o.addr == "":
		return errors.New("recv needs --addr")
	}
	return nil
}

// printAddr tells the parent where the sender listens.
func printAddr(w io.Writer, addr string) error {
	return json.NewEncoder(w).Encode(map[string]string{"addr": addr})
}

// payload returns size incompressible bytes.
func payload(size int) []byte {
	b := make([]byte, size)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// result is the last line a peer prints.
type result struct {
	Role    string  `json:"role"`
	Bytes   int64   `json:"bytes"`
	Batches int64   `json:"batches"`
	Seconds float64 `json:"seconds"`
	CPUS    float64 `json:"cpu_s"`
}

// meter measures wall and process CPU time over a window.
type meter struct {
	t0   time.Time
	cpu0 float64
}

func startMeter() meter { return meter{t0: time.Now(), cpu0: cpuSeconds()} }

func (m meter) result(role string, bytes, batches int64) result {
	return result{Role: role, Bytes: bytes, Batches: batches, Seconds: time.Since(m.t0).Seconds(), CPUS: cpuSeconds() - m.cpu0}
}

// cpuSeconds is the user+system time of the whole process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
