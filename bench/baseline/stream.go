package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// frameHeader is the length prefix of every tcp / tcp-tls frame.
const frameHeader = 8

// streamSend serves one receiver over TCP (with TLS for tcp-tls): frames of
// an 8-byte length and the payload, then a clean close.
func streamSend(ctx context.Context, o options, stdout io.Writer) (result, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.listen)
	if err != nil {
		return result{}, err
	}
	defer ln.Close()
	if err := printAddr(stdout, ln.Addr().String()); err != nil {
		return result{}, err
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	raw, err := ln.Accept()
	if err != nil {
		return result{}, fmt.Errorf("accept: %w", err)
	}
	defer raw.Close()
	stopConn := context.AfterFunc(ctx, func() { raw.Close() })
	defer stopConn()
	conn := raw
	if o.transport == "tcp-tls" {
		srv, _, err := selfSigned("")
		if err != nil {
			return result{}, err
		}
		tc := tls.Server(raw, srv)
		if err := tc.HandshakeContext(ctx); err != nil {
			return result{}, fmt.Errorf("tls handshake: %w", err)
		}
		conn = tc
	}
	// One buffer holds prefix and payload, so each batch is one write (one
	// TLS record run, no tiny record for the prefix).
	frames := make([][]byte, len(o.batches.records))
	for i, rec := range o.batches.records {
		frames[i] = make([]byte, frameHeader+len(rec))
		binary.BigEndian.PutUint64(frames[i], uint64(len(rec)))
		copy(frames[i][frameHeader:], rec)
	}
	m := startMeter()
	end := m.t0.Add(time.Duration(o.seconds * float64(time.Second)))
	var batches, bytes int64
	for time.Now().Before(end) {
		frame := frames[batches%int64(len(frames))]
		if _, err := conn.Write(frame); err != nil {
			return result{}, fmt.Errorf("write batch %d: %w", batches, err)
		}
		batches++
		bytes += int64(len(frame) - frameHeader)
	}
	type closeWriter interface{ CloseWrite() error }
	if err := conn.(closeWriter).CloseWrite(); err != nil {
		return result{}, fmt.Errorf("close write: %w", err)
	}
	res := m.result("send", bytes, batches)
	// Wait for the receiver to finish reading and close, so no byte is lost
	// to an early close; bounded by ctx.
	_, _ = io.Copy(io.Discard, raw)
	return res, nil
}

// streamRecv dials the sender and reads frames until the clean end.
func streamRecv(ctx context.Context, o options) (result, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", o.addr)
	if err != nil {
		return result{}, err
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	var conn io.Reader = raw
	if o.transport == "tcp-tls" {
		_, cli, err := selfSigned("")
		if err != nil {
			return result{}, err
		}
		tc := tls.Client(raw, cli)
		if err := tc.HandshakeContext(ctx); err != nil {
			return result{}, fmt.Errorf("tls handshake: %w", err)
		}
		conn = tc
	}
	buf := make([]byte, o.batches.max)
	var hdr [frameHeader]byte
	var m meter
	var bytes, batches int64
	for i := 0; ; i++ {
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) && i > 0 {
				break
			}
			return result{}, fmt.Errorf("read frame %d: %w", i, err)
		}
		want := o.batches.size(int64(i))
		if n := binary.BigEndian.Uint64(hdr[:]); n != uint64(want) {
			return result{}, fmt.Errorf("frame %d announces %d bytes, want %d", i, n, want)
		}
		if _, err := io.ReadFull(conn, buf[:want]); err != nil {
			return result{}, fmt.Errorf("read frame %d: %w", i, err)
		}
		if i == 0 {
			m = startMeter() // the window starts after the first batch
			continue
		}
		bytes += int64(want)
		batches++
	}
	return m.result("recv", bytes, batches), nil
}
