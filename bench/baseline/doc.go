// Command baseline is the comparison side of `feedmesh-bench transport`: it
// plays the sender or the receiver of a one-way stream of equal-sized raw
// batches over gRPC+TLS, TCP+TLS or plain TCP, so feedmesh's QUIC data path can
// be measured against them in the same run, on the same path.
//
// It lives in its own Go module so that the feedmesh binary never links gRPC.
// Build it with
//
//	cd bench/baseline && go build -o /tmp/fm-baseline .
//
// and pass the binary to `feedmesh-bench transport --baseline /tmp/fm-baseline`.
//
// # Peer protocol (shared with feedmesh's own bench peers)
//
// The sender is the server, as a tf.data service worker is: it listens,
// prints one JSON line {"addr":"host:port"} on stdout, accepts one
// connection, sends batches of --size bytes for --seconds, ends the stream
// cleanly and prints one result line. The receiver dials --addr, reads until
// the clean end and prints its result line. A result line is
//
//	{"role":"send|recv","bytes":B,"batches":N,"seconds":S,"cpu_s":C}
//
// where seconds and cpu_s cover the measured window only (receiver: first
// byte to end of stream; sender: accept to end of stream), cpu_s being the
// process's user+system time from getrusage over that window. Both peers give
// up after --timeout.
//
// With --payload-file PATH instead of --size, the sender sends the file's
// records in order, cycling (a record is an 8-byte big-endian length in
// [1, 256 MiB] and that many bytes; the text workload of `feedmesh-bench
// transport` writes one padded token batch per record), and the receiver,
// given the same file, sizes its buffer to the largest record and rejects a
// batch whose size is not the expected record's; bytes count the records.
//
// Transports:
//   - grpc-tls: a server-streaming RPC whose messages are
//     google.protobuf.BytesValue, over TLS 1.3 with a self-signed certificate
//     generated at start (the shape of tf.data service's GetElement stream);
//   - tcp-tls: 8-byte big-endian length + payload frames over TLS 1.3;
//   - tcp: the same frames over plain TCP.
package main
