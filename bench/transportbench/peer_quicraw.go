package transportbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/quic-go/quic-go"
)

// rawALPN is the application protocol of quic-raw connections.
const rawALPN = "feedmesh-bench-raw"

// quicRawSend accepts one connection and one stream with quic-go's default
// config (nil *quic.Config) and writes o.size-byte chunks for o.seconds.
func quicRawSend(ctx context.Context, o peerOptions, stdin io.Reader, stdout io.Writer) (result, error) {
	srvTLS, _, err := selfSigned(rawALPN)
	if err != nil {
		return result{}, err
	}
	pc, err := net.ListenPacket("udp", o.listen)
	if err != nil {
		return result{}, err
	}
	defer pc.Close()
	qt := &quic.Transport{Conn: pc}
	defer qt.Close()
	ln, err := qt.Listen(srvTLS, nil)
	if err != nil {
		return result{}, err
	}
	defer ln.Close()
	if err := printAddr(stdout, pc.LocalAddr().String()); err != nil {
		return result{}, err
	}
	conn, err := ln.Accept(ctx)
	if err != nil {
		return result{}, fmt.Errorf("accept connection: %w", err)
	}
	defer conn.CloseWithError(0, "done")
	stop := context.AfterFunc(ctx, func() { conn.CloseWithError(1, "timeout") }) // unblocks writes
	defer stop()
	st, err := conn.AcceptStream(ctx)
	if err != nil {
		return result{}, fmt.Errorf("accept stream: %w", err)
	}
	var hello [1]byte
	if _, err := io.ReadFull(st, hello[:]); err != nil {
		return result{}, fmt.Errorf("read hello: %w", err)
	}
	data := randomBytes(o.size)
	m := startMeter()
	end := m.t0.Add(time.Duration(o.seconds * float64(time.Second)))
	var batches int64
	for time.Now().Before(end) {
		if _, err := st.Write(data); err != nil {
			return result{}, fmt.Errorf("write batch %d: %w", batches, err)
		}
		batches++
	}
	if err := st.Close(); err != nil {
		return result{}, err
	}
	res := m.result("send", batches*int64(o.size), batches)
	waitRelease(ctx, stdin)
	return res, nil
}

// quicRawRecv dials with quic-go's default config, opens one stream, says
// hello and reads o.size-byte chunks until the stream's FIN.
func quicRawRecv(ctx context.Context, o peerOptions) (result, error) {
	_, cliTLS, err := selfSigned(rawALPN)
	if err != nil {
		return result{}, err
	}
	ua, err := net.ResolveUDPAddr("udp", o.addr)
	if err != nil {
		return result{}, err
	}
	pc, err := net.ListenPacket("udp", ":0")
	if err != nil {
		return result{}, err
	}
	defer pc.Close()
	qt := &quic.Transport{Conn: pc}
	defer qt.Close()
	conn, err := qt.Dial(ctx, ua, cliTLS, nil)
	if err != nil {
		return result{}, err
	}
	defer conn.CloseWithError(0, "done")
	stop := context.AfterFunc(ctx, func() { conn.CloseWithError(1, "timeout") })
	defer stop()
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return result{}, err
	}
	if _, err := st.Write([]byte{1}); err != nil {
		return result{}, err
	}
	buf := make([]byte, o.size)
	var m meter
	var batches int64
	for i := 0; ; i++ {
		if _, err := io.ReadFull(st, buf); err != nil {
			if errors.Is(err, io.EOF) && i > 0 {
				break
			}
			return result{}, fmt.Errorf("read batch %d: %w", i, err)
		}
		if i == 0 {
			m = startMeter()
			continue
		}
		batches++
	}
	return m.result("recv", batches*int64(o.size), batches), nil
}
