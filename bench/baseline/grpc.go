package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The one RPC of the baseline: the client asks once, the server streams
// BytesValue messages (a protobuf bytes field, as tf.data service's
// GetElement responses carry compressed/serialized elements). The service
// is declared by hand so no generated code (protoc) is needed.
const streamMethod = "/feedmesh.bench.Baseline/Stream"

var streamDesc = grpc.StreamDesc{StreamName: "Stream", ServerStreams: true}

// grpcSlack is room above the payload for the protobuf framing of one message.
const grpcSlack = 1 << 10

// grpcSend serves one Stream call: BytesValue messages of --size bytes (or
// the --payload-file records in turn) for --seconds, then the OK status.
func grpcSend(ctx context.Context, o options, stdout io.Writer) (result, error) {
	srvTLS, _, err := selfSigned("h2")
	if err != nil {
		return result{}, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.listen)
	if err != nil {
		return result{}, err
	}
	done := make(chan result, 1)
	handler := func(_ any, stream grpc.ServerStream) error {
		if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
			return err
		}
		m := startMeter()
		end := m.t0.Add(time.Duration(o.seconds * float64(time.Second)))
		var batches, bytes int64
		for time.Now().Before(end) {
			data := o.batches.at(batches)
			if err := stream.SendMsg(&wrapperspb.BytesValue{Value: data}); err != nil {
				return err
			}
			batches++
			bytes += int64(len(data))
		}
		select {
		case done <- m.result("send", bytes, batches):
		default:
		}
		return nil
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(srvTLS)), grpc.MaxSendMsgSize(o.size+grpcSlack))
	desc := streamDesc
	desc.Handler = handler
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "feedmesh.bench.Baseline",
		HandlerType: (*any)(nil),
		Streams:     []grpc.StreamDesc{desc},
	}, struct{}{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := printAddr(stdout, ln.Addr().String()); err != nil {
		srv.Stop()
		<-served
		return result{}, err
	}
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		srv.Stop()
		<-served
		return result{}, ctx.Err()
	}
	// Let the receiver read the rest and the status, bounded.
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		srv.Stop()
		<-stopped
	}
	<-served
	return res, nil
}

// grpcRecv calls Stream and receives until the OK status.
func grpcRecv(ctx context.Context, o options) (result, error) {
	_, cliTLS, err := selfSigned("h2")
	if err != nil {
		return result{}, err
	}
	conn, err := grpc.NewClient("passthrough:///"+o.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(cliTLS)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.size+grpcSlack)))
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	stream, err := conn.NewStream(ctx, &streamDesc, streamMethod)
	if err != nil {
		return result{}, err
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		return result{}, err
	}
	if err := stream.CloseSend(); err != nil {
		return result{}, err
	}
	var m meter
	var bytes, batches int64
	for i := 0; ; i++ {
		msg := new(wrapperspb.BytesValue) // a fresh message per batch, as a real consumer keeps them
		if err := stream.RecvMsg(msg); err != nil {
			if errors.Is(err, io.EOF) && i > 0 {
				break
			}
			return result{}, fmt.Errorf("receive batch %d: %w", i, err)
		}
		want := o.batches.size(int64(i))
		if len(msg.Value) != want {
			return result{}, fmt.Errorf("batch %d has %d bytes, want %d", i, len(msg.Value), want)
		}
		if i == 0 {
			m = startMeter()
			continue
		}
		bytes += int64(want)
		batches++
	}
	return m.result("recv", bytes, batches), nil
}
