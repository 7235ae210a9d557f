// Package transportbench is the machinery of `feedmesh bench transport`: it
// measures one-way batch streams between two processes (a sender that plays
// the worker and a receiver that plays the training client) over feedmesh's
// data path and over the baselines, and reports throughput and CPU cost per
// GB side by side, with ratios to gRPC+TLS taken in the same run.
//
// Transports measured:
//   - feedmesh: the data path as shipped — transport.Transport (QUIC, TLS 1.3,
//     DefaultConfig) carrying batch.Encode frames through batch.Sender and
//     batch.Receiver, credits included (client Window 4, as client.Options);
//   - quic-raw: quic-go with its default config, one stream of raw bytes;
//   - grpc-tls, tcp-tls, tcp: the baseline binary built from bench/baseline
//     (its own Go module, so nothing here links gRPC).
//
// Levers (Config.Levers) are variants of the feedmesh transport measured in
// the same run: GOMAXPROCS=1 in both peers, 2 and 4 QUIC connections per
// pair (one batch stream on each, the sender serving them concurrently), and
// larger stream/connection receive windows.
//
// The peers of the feedmesh transports run in the feedmesh binary itself (a
// hidden mode, see RunPeer); the peer protocol is the one described in
// bench/baseline's doc.go. Paths: loopback, or a veth pair between two network
// namespaces (veth.go, the same set-up as scripts/veth.sh).
//
// Files: harness.go (Config, Run: spawning and timing the pairs), peer.go
// (RunPeer, the protocol), peer_feedmesh.go, peer_quicraw.go, report.go (rows,
// medians, the table), veth.go.
package transportbench
